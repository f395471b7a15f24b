//go:build unix

// Package flock takes and releases flock(2) locks: whole-file, advisory
// locks that belong to the open file, so two opens in one process exclude
// each other as two processes do. The audit log and the pins file use it
// to let several troupe processes (a server and the CLI) append or
// rewrite one file in turn.
package flock

import (
	"os"

	"golang.org/x/sys/unix"
)

// Lock takes an exclusive lock on f, waiting for other holders.
func Lock(f *os.File) error { return flock(f, unix.LOCK_EX) }

// Unlock releases Lock's lock.
func Unlock(f *os.File) { _ = flock(f, unix.LOCK_UN) }

func flock(f *os.File, how int) error {
	rc, err := f.SyscallConn()
	if err != nil {
		return err
	}
	var ferr error
	err = rc.Control(func(fd uintptr) {
		for {
			if ferr = unix.Flock(int(fd), how); ferr != unix.EINTR {
				return
			}
		}
	})
	if err != nil {
		return err
	}
	return ferr
}
