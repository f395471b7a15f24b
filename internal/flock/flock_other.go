//go:build !unix

package flock

import (
	"errors"
	"os"
)

// Lock fails: several processes sharing a file need flock(2), which this
// system does not have.
func Lock(*os.File) error { return errors.New("file locking is not supported on this system") }

// Unlock does nothing.
func Unlock(*os.File) {}
