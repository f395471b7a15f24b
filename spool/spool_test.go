package spool_test

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"strings"
	"sync"
	"testing"

	"troupe/spool"
)

func TestCaptureKeepsHeadTailAndSpoolsEverything(t *testing.T) {
	dir := t.TempDir()
	store := spool.NewStore(dir, spool.Limits{InlineBytes: 8})
	defer store.Close()
	out, err := store.Create("abc")
	if err != nil {
		t.Fatal(err)
	}
	var want bytes.Buffer
	for i := range 1000 {
		line := fmt.Sprintf("line %d\n", i)
		want.WriteString(line)
		out.Stdout.Write([]byte(line))
	}
	out.Close()
	if got := out.Stdout.Total(); got != int64(want.Len()) {
		t.Fatalf("total %d, want %d", got, want.Len())
	}
	if !out.Stdout.Truncated() {
		t.Fatal("not truncated")
	}
	text := out.Stdout.Text()
	if _, rest, _ := strings.Cut(text, "]\n"); !strings.HasPrefix(rest, "line 0\nl\n[... ") || !strings.HasSuffix(text, "ne 999\n") ||
		!strings.Contains(text, "troupe://output/abc/stdout") {
		t.Fatalf("text %q", text)
	}
	var got bytes.Buffer
	uri := out.Stdout.URI()
	for {
		ch, err := store.Read(uri)
		if err != nil {
			t.Fatal(err)
		}
		got.Write(ch.Data)
		if ch.Next == 0 {
			break
		}
		uri = fmt.Sprintf("%s?offset=%d&length=1000", out.Stdout.URI(), ch.Next)
	}
	if got.String() != want.String() {
		t.Fatal("spooled stream differs from what was written")
	}
	if b, ok := out.Stdout.Bytes(1 << 20); !ok || !bytes.Equal(b, want.Bytes()) {
		t.Fatal("Bytes does not return the whole stream")
	}
	if _, ok := out.Stdout.Bytes(100); ok {
		t.Fatal("Bytes ignores its limit")
	}
	if out.Stderr.URI() != "" {
		t.Fatal("an empty stream has a URI")
	}
	if err := store.Close(); err != nil {
		t.Fatal(err)
	}
	if entries, _ := os.ReadDir(dir); len(entries) != 0 {
		t.Fatalf("Close left %d entries", len(entries))
	}
	if _, err := store.Read(out.Stdout.URI()); !errors.Is(err, spool.ErrClosed) {
		t.Fatalf("read after close: %v", err)
	}
}

func TestReadKeepsUTF8AndRejectsBadURIs(t *testing.T) {
	store := spool.NewStore(t.TempDir(), spool.Limits{})
	defer store.Close()
	out, _ := store.Create("u")
	out.Stdout.Write([]byte("aé")) // 'é' is two bytes
	out.Close()
	ch, err := store.Read("troupe://output/u/stdout?length=2")
	if err != nil {
		t.Fatal(err)
	}
	if string(ch.Data) != "a" || ch.Next != 1 || !ch.Text {
		t.Fatalf("chunk %+v", ch)
	}
	for _, bad := range []string{"troupe://output/u/other", "troupe://output/nope/stdout",
		"file:///etc/passwd", "troupe://output/u/stdout?offset=-1", "troupe://output/u/stdout?offset=99"} {
		if _, err := store.Read(bad); err == nil {
			t.Errorf("%s: no error", bad)
		}
	}
	if _, err := store.Create("../x"); err == nil {
		t.Error("an id with a path in it was accepted")
	}
}

func TestStoreEvictsOldestFinished(t *testing.T) {
	store := spool.NewStore(t.TempDir(), spool.Limits{MaxOutputs: 2})
	defer store.Close()
	a, _ := store.Create("a")
	a.Stdout.Write([]byte("a"))
	a.Close()
	b, _ := store.Create("b")
	b.Stdout.Write([]byte("b"))
	c, _ := store.Create("c") // evicts a
	c.Stdout.Write([]byte("c"))
	if _, err := store.Read("troupe://output/a/stdout"); !errors.Is(err, spool.ErrNotFound) {
		t.Fatalf("a not evicted: %v", err)
	}
	d, _ := store.Create("d") // b and c still running: nothing to evict
	d.Stdout.Write([]byte("d"))
	if got := len(store.List()); got != 3 {
		t.Fatalf("%d resources, want 3", got)
	}
}

// TestEmptyOutputLeavesTheStore closes an output that took no byte and
// one that did: only the second stays listed and readable, and empty
// ones do not pile up to push it out (MaxOutputs 2: the kept one and the
// call being created).
func TestEmptyOutputLeavesTheStore(t *testing.T) {
	store := spool.NewStore(t.TempDir(), spool.Limits{MaxOutputs: 2})
	defer store.Close()
	kept, _ := store.Create("kept")
	kept.Stdout.Write([]byte("x"))
	kept.Close()
	for _, id := range []string{"e1", "e2", "e3"} {
		empty, err := store.Create(id)
		if err != nil {
			t.Fatal(err)
		}
		empty.Close()
		if empty.Stdout.Total() != 0 {
			t.Fatalf("%s: %d bytes", id, empty.Stdout.Total())
		}
	}
	if got := store.List(); len(got) != 1 {
		t.Fatalf("listed %v, want only the output with bytes", got)
	}
	if _, err := store.Read("troupe://output/kept/stdout"); err != nil {
		t.Fatalf("the output with bytes was evicted by empty ones: %v", err)
	}
	if _, err := store.Read("troupe://output/e1/stdout"); !errors.Is(err, spool.ErrNotFound) {
		t.Fatalf("empty output still readable: %v", err)
	}
}

func TestFileCapCountsButStops(t *testing.T) {
	store := spool.NewStore(t.TempDir(), spool.Limits{MaxFileBytes: 10, InlineBytes: 2})
	defer store.Close()
	o, _ := store.Create("x")
	o.Stdout.Write(bytes.Repeat([]byte("z"), 25))
	o.Close()
	if o.Stdout.Total() != 25 || o.Stdout.Spooled() != 10 {
		t.Fatalf("total %d spooled %d", o.Stdout.Total(), o.Stdout.Spooled())
	}
	if _, ok := o.Stdout.Bytes(100); ok {
		t.Fatal("Bytes claims a complete stream the file does not hold")
	}
}

func TestConcurrentWriteAndRead(t *testing.T) {
	store := spool.NewStore(t.TempDir(), spool.Limits{InlineBytes: 64})
	defer store.Close()
	o, _ := store.Create("w")
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		for range 2000 {
			o.Stdout.Write([]byte("0123456789\n"))
		}
		o.Close()
	}()
	for range 200 {
		_ = o.Stdout.Text()
		_ = o.Stdout.Last(20)
		_, _ = store.Read(o.Stdout.URI())
		_ = store.List()
	}
	wg.Wait()
	if o.Stdout.Total() != 22000 {
		t.Fatal(o.Stdout.Total())
	}
}

func TestMemoryOnlyOutput(t *testing.T) {
	o := spool.NewOutput(spool.Limits{InlineBytes: 4})
	o.Stdout.Write([]byte("abcdefghijkl"))
	o.Close()
	if o.Stdout.URI() != "" || o.Stdout.Text() != "abcd\n[... 4 bytes of stdout omitted ...]\nijkl" {
		t.Fatalf("%q %q", o.Stdout.URI(), o.Stdout.Text())
	}
	if o.Stdout.Last(3) != "...jkl" {
		t.Fatal(o.Stdout.Last(3))
	}
}

func ExampleStore() {
	store := spool.NewStore("", spool.Limits{})
	defer store.Close()
	out, _ := store.Create("c0ffee")
	fmt.Fprintln(out.Stdout, "hello")
	out.Close()
	fmt.Print(out.Stdout.Text())
	fmt.Println(out.Stdout.URI())
	// Output:
	// hello
	// troupe://output/c0ffee/stdout
}

// A call that writes nothing costs no file, nor even the store's directory.
func TestNoOutputNoFiles(t *testing.T) {
	dir := t.TempDir()
	store := spool.NewStore(dir, spool.Limits{})
	for i := range 10 {
		o, err := store.Create(fmt.Sprintf("c%d", i))
		if err != nil {
			t.Fatal(err)
		}
		o.Close()
	}
	if entries, _ := os.ReadDir(dir); len(entries) != 0 {
		t.Fatalf("%d entries for outputs that wrote nothing", len(entries))
	}
	store.Close()
}
