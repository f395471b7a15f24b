//go:build !linux

package command

// supported says whether this system can run command tools: only Linux
// can wait for a process without reaping it (waitid with WNOWAIT), which
// the group kill relies on.
const supported = false
