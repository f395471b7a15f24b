//go:build !linux

package sandbox

import "errors"

// AwaitExit needs Linux (waitid with WNOWAIT); elsewhere it fails.
func AwaitExit(pid int) error { return errors.New("waiting without reaping needs Linux") }
