//go:build !linux

package command

import "errors"

// supported says whether this system can run command tools: only Linux
// can wait for a process without reaping it (waitid with WNOWAIT), which
// the group kill relies on.
const supported = false

func awaitExit(pid int) error { return errors.New("command tools need Linux") }
