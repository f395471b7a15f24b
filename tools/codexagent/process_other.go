//go:build !linux

package codexagent

// supported says whether this system can run Codex the way this package
// does: only Linux can wait for a process without reaping it (waitid with
// WNOWAIT), which the group kill relies on.
const supported = false
