package spool_test

import (
	"bytes"
	"fmt"
	"regexp"
	"strings"
	"testing"

	"troupe/spool"
)

// codexResultBytes is about what Codex 0.169.0 keeps of one tool result
// (measured: e2e/codex_output_test.go): a cut there removes the middle of
// the text and every content block after it.
const codexResultBytes = 12000

// numbered writes n lines "line 000001\n"… to w and returns them.
func numbered(w interface{ Write([]byte) (int, error) }, n int) string {
	var b strings.Builder
	for i := 1; i <= n; i++ {
		fmt.Fprintf(&b, "line %06d\n", i)
	}
	w.Write([]byte(b.String()))
	return b.String()
}

// rangeRE finds the range the note suggests reading next.
var rangeRE = regexp.MustCompile(`e\.g\. (troupe://output/\S+\?offset=(\d+)&length=(\d+))\]\n`)

// TestTextStartsWithWhereTheRestIs: a partial view of a stream starts with
// the note saying how big the stream is, what the view shows and where the
// whole of it is, with a range to read next that starts at the first byte
// left out; with the default limits the view (both streams of shell.exec)
// fits what Codex keeps of a result.
func TestTextStartsWithWhereTheRestIs(t *testing.T) {
	store := spool.NewStore(t.TempDir(), spool.Limits{})
	defer store.Close()
	out, err := store.Create("abc")
	if err != nil {
		t.Fatal(err)
	}
	whole := numbered(out.Stdout, 100000) // 1.2 MB
	numbered(out.Stderr, 100000)
	out.Close()

	text := out.Stdout.Text()
	first, rest, ok := strings.Cut(text, "\n")
	if !ok || !strings.HasPrefix(first, "[stdout: 1200000 bytes; this shows the first 2048 and the last 2048 bytes; the whole stdout is at troupe://output/abc/stdout: ") {
		t.Fatalf("the text does not start with the note:\n%.400s", text)
	}
	if !strings.HasPrefix(rest, whole[:2048]+"\n[... 1195904 bytes of stdout omitted ...]\n") || !strings.HasSuffix(rest, whole[len(whole)-2048:]) {
		t.Fatalf("head, gap and tail are not as written:\n%.400s", rest)
	}
	m := rangeRE.FindStringSubmatch(text)
	if m == nil || m[2] != "2048" || m[3] != fmt.Sprint(spool.ReadChunk) {
		t.Fatalf("the note offers no range from byte 2048: %q", first)
	}
	ch, err := store.Read(m[1])
	if err != nil || string(ch.Data) != whole[2048:2048+spool.ReadChunk] {
		t.Fatalf("reading the suggested range: %v, %.80q", err, ch.Data)
	}

	// shell.exec shows both streams, JSON-encoded, in one result.
	both := len(out.Stdout.Text()) + len(out.Stderr.Text())
	if both > codexResultBytes*3/4 {
		t.Fatalf("the default view of two streams is %d bytes, too close to the %d Codex keeps", both, codexResultBytes)
	}

	// An error's excerpt (Last) starts with the note too.
	last := out.Stdout.Last(100)
	if !strings.HasPrefix(last, "[stdout: 1200000 bytes; this shows the last 100 bytes; the whole stdout is at troupe://output/abc/stdout") ||
		!strings.HasSuffix(last, "]\n..."+whole[len(whole)-100:]) {
		t.Fatalf("Last: %q", last)
	}
	if m := rangeRE.FindStringSubmatch(last); m == nil || m[2] != "0" {
		t.Fatalf("Last's note offers no range from the start: %q", last)
	}
}

// TestTextWholeHasNoNote: a stream shown whole, and a memory-only one
// (nothing to point at), carry no note.
func TestTextWholeHasNoNote(t *testing.T) {
	store := spool.NewStore(t.TempDir(), spool.Limits{InlineBytes: 1024})
	defer store.Close()
	out, _ := store.Create("small")
	whole := numbered(out.Stdout, 170) // 2040 bytes
	out.Close()
	if out.Stdout.Text() != whole || out.Stdout.Last(5000) != whole {
		t.Fatalf("a stream shown whole was changed: %q", out.Stdout.Text())
	}
	mem := spool.NewOutput(spool.Limits{InlineBytes: 4})
	mem.Stdout.Write([]byte("abcdefghijkl"))
	mem.Close()
	if got := mem.Stdout.Text(); strings.Contains(got, "[stdout:") {
		t.Fatalf("memory only: %q", got)
	}
}

// TestTextNoteAfterCaps: when a cap kept the file short, the note says how
// much is kept and which cap stopped it, and offers a range only inside
// what is kept.
func TestTextNoteAfterCaps(t *testing.T) {
	store := spool.NewStore(t.TempDir(), spool.Limits{InlineBytes: 1024, MaxFileBytes: 5000})
	defer store.Close()
	out, _ := store.Create("cut")
	out.Stdout.Write(bytes.Repeat([]byte("x"), 20000))
	out.Close()
	first, _, _ := strings.Cut(out.Stdout.Text(), "\n")
	want := "[stdout: 20000 bytes; this shows the first 1024 and the last 1024 bytes; the first 5000 bytes are at troupe://output/cut/stdout " +
		"(read them with resources/read in ranges, e.g. troupe://output/cut/stdout?offset=1024&length=8192), " +
		"the rest was not kept: the spool limit of one stream was reached (output.max_spool_bytes = 5000)]"
	if first != want {
		t.Fatalf("note:\n%s\nwant\n%s", first, want)
	}

	store2 := spool.NewStore(t.TempDir(), spool.Limits{InlineBytes: 1024, MaxFileBytes: 1000})
	defer store2.Close()
	out2, _ := store2.Create("tiny")
	out2.Stdout.Write(bytes.Repeat([]byte("y"), 20000))
	out2.Close()
	if first, _, _ := strings.Cut(out2.Stdout.Text(), "\n"); strings.Contains(first, "?offset=") || !strings.Contains(first, "the first 1000 bytes are at troupe://output/tiny/stdout, the rest was not kept") {
		t.Fatalf("a file shorter than the head offers a range: %s", first)
	}
}
