package command

// Output limits.
const (
	// MaxOutputBytes is the largest stdout an output schema is checked
	// against, and how much of each stream a call keeps in memory when
	// it has no spool (head and tail halves). With a spool (always, under
	// troupe) the result shows the spool's head and tail and links the
	// whole stream.
	MaxOutputBytes = 1 << 20
	// stderrExcerptBytes is how much of stderr's end an error shows.
	stderrExcerptBytes = 2 << 10
	// stdoutExcerptBytes is how much of stdout's end an error shows. An
	// error quoting both ends, each with its note (spool.Capture.Last:
	// where the whole stream is), stays under the 12,000 bytes Codex
	// keeps of a tool result.
	stdoutExcerptBytes = 4 << 10
)
