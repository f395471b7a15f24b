// Command troupe-sandbox is troupe's standalone sandbox helper. troupe
// starts it for every sandboxed run; it applies the run's isolation
// (rlimits, capability drop, Landlock, seccomp, cgroup) to itself and
// then execs the program (see package sandbox).
//
// troupe works without it, re-executing its own binary as the helper, but
// this program links only package sandbox and so starts several times
// faster (about 0.7 ms after exec against 6.5 ms for troupe), which was
// most of the cost a sandbox adds to a short command. Install it beside
// troupe, without cgo (a static binary skips the dynamic loader, about
// 0.4 ms of every sandboxed start; the only cgo it would link is libcap's
// psx, which has a pure-Go form):
//
//	go install ./cmd/troupe
//	CGO_ENABLED=0 go install ./cmd/troupe-sandbox
//
// troupe uses it only if it answers the probe with the same
// sandbox.HelperProtocol, that is, if it comes from a matching build.
package main

import (
	"os"

	"troupe/sandbox"
)

func main() { os.Exit(sandbox.HelperMain(os.Args)) }
