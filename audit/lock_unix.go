//go:build unix

package audit

import (
	"os"

	"golang.org/x/sys/unix"
)

// lockFile takes an exclusive flock(2) on f, waiting for other holders (in
// this or another process: flock locks belong to the open file, so two
// Logs of one process exclude each other too).
func lockFile(f *os.File) error { return flock(f, unix.LOCK_EX) }

// unlockFile releases lockFile's lock.
func unlockFile(f *os.File) { _ = flock(f, unix.LOCK_UN) }

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
