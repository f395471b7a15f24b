// Package spool keeps the whole output of tool runs on disk while results
// carry only a bounded head and tail of it.
//
// A program may print far more than a client can take in one result (or a
// model can read). troupe never buffers output without bound and never
// throws it away: every byte a run writes goes to a Capture, which keeps
// the first and last few kilobytes in memory for the result and appends
// everything to a spool file. The file is offered to the client as a
// resource_link (troupe://output/<id>/<stream>) that resources/read serves,
// in ranges, for as long as the session lives.
//
//	store := spool.NewStore("", spool.Limits{})   // one per session
//	defer store.Close()                            // removes every file
//	out, _ := store.Create("c0ffee")               // one per call
//	fmt.Fprintln(out.Stdout, "hello")
//	out.Close()
//	fmt.Println(out.Stdout.Text())                 // "hello\n"
//
// Disk is bounded at three levels: each stream (Limits.MaxFileBytes), each
// store, that is each session (Limits.MaxStoreBytes), and the whole server
// (a Budget every store shares, Limits.Shared). A capture reserves bytes
// from all three, atomically, before it writes them, so concurrent calls
// cannot overrun a cap. The first byte a cap refuses ends the stream's
// file (it stays a prefix of the stream); the rest is counted, not kept,
// and the head-and-tail text (Capture.Text) and Capture.Describe say how
// much the file holds and which cap, with its setting, was reached.
// Evicting an output or closing a store gives its bytes back; a new
// output first evicts the oldest finished ones to make room for itself.
//
// Captures are safe for one writer and any number of readers at once: an
// invocation that gives up on a run (deadline) reads the partial output
// while the run is still being stopped.
package spool
