package command

import (
	"strings"
	"unicode/utf8"
)

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
	// stdoutExcerptBytes is how much of stdout's end an error shows.
	stdoutExcerptBytes = 16 << 10
)

// cutIncomplete is len(b) without a UTF-8 sequence cut short at its end.
func cutIncomplete(b []byte) int {
	for s := len(b) - 1; s >= 0 && s >= len(b)-utf8.UTFMax; s-- {
		if utf8.RuneStart(b[s]) {
			if !utf8.FullRune(b[s:]) {
				return s
			}
			break
		}
	}
	return len(b)
}

// skipContinuation is how many leading bytes of b belong to a UTF-8
// sequence that started before b (at most three).
func skipContinuation(b []byte) int {
	i := 0
	for i < len(b) && i < utf8.UTFMax-1 && !utf8.RuneStart(b[i]) {
		i++
	}
	return i
}

// validText replaces each run of bytes that are not UTF-8 with U+FFFD, so
// results always encode as JSON strings.
func validText(s string) string { return strings.ToValidUTF8(s, "\uFFFD") }
