//go:build unix

package main

import (
	"fmt"
	"os"

	"golang.org/x/sys/unix"
)

// reserveStdout duplicates stdout's descriptor for the protocol and points
// descriptor 1 at stderr, so only the protocol writer can reach the real
// stdout.
func reserveStdout(stdout, stderr *os.File) (*os.File, error) {
	fd, err := unix.FcntlInt(stdout.Fd(), unix.F_DUPFD_CLOEXEC, 3)
	if err != nil {
		return nil, fmt.Errorf("dup stdout: %w", err)
	}
	if err := unix.Dup3(int(stderr.Fd()), int(stdout.Fd()), 0); err != nil {
		unix.Close(fd)
		return nil, fmt.Errorf("redirect stdout to stderr: %w", err)
	}
	return os.NewFile(uintptr(fd), "protocol-stdout"), nil
}
