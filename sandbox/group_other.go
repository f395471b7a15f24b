//go:build !unix

package sandbox

import (
	"errors"
	"os/exec"
)

// setGroup refuses: without process groups a run could not be killed as a
// whole.
func setGroup(*exec.Cmd) error { return errors.New("process groups need a Unix system") }

// killGroup has nothing to do where setGroup refuses.
func killGroup(int) {}
