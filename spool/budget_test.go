package spool_test

import (
	"bytes"
	"errors"
	"fmt"
	"io/fs"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"troupe/spool"
)

// diskBytes is the size of every regular file under dir.
func diskBytes(t *testing.T, dir string) int64 {
	t.Helper()
	var n int64
	err := filepath.WalkDir(dir, func(_ string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		info, err := d.Info()
		if err != nil {
			return err
		}
		n += info.Size()
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return n
}

func create(t *testing.T, s *spool.Store, id string) *spool.Output {
	t.Helper()
	o, err := s.Create(id)
	if err != nil {
		t.Fatal(err)
	}
	return o
}

// Several calls of one session, running at once, share the session's cap:
// together they never keep more than it on disk, the stream that hits it
// keeps the bytes that fit and counts the rest, and its text says which
// cap was reached and which key raises it.
func TestSessionCapAcrossOutputs(t *testing.T) {
	dir := t.TempDir()
	store := spool.NewStore(dir, spool.Limits{InlineBytes: 4, MaxFileBytes: 60, MaxStoreBytes: 100})
	defer store.Close()
	a, b, c := create(t, store, "a"), create(t, store, "b"), create(t, store, "c")
	a.Stdout.Write(bytes.Repeat([]byte("a"), 50))
	b.Stderr.Write(bytes.Repeat([]byte("b"), 40))
	c.Stdout.Write(bytes.Repeat([]byte("c"), 30)) // 10 fit
	c.Stdout.Write([]byte("later"))               // nothing fits
	a.Stdout.Write([]byte("more"))                // the session is full
	if got := []int64{a.Stdout.Spooled(), b.Stderr.Spooled(), c.Stdout.Spooled()}; got[0] != 50 || got[1] != 40 || got[2] != 10 {
		t.Fatalf("spooled %v, want [50 40 10]", got)
	}
	if c.Stdout.Total() != 35 || a.Stdout.Total() != 54 {
		t.Fatalf("totals %d %d: bytes past the cap must still be counted", c.Stdout.Total(), a.Stdout.Total())
	}
	if n := diskBytes(t, dir); n != 100 {
		t.Fatalf("%d bytes on disk, cap 100", n)
	}
	if c.Stdout.Cut() != spool.CapSession || a.Stdout.Cut() != spool.CapSession || b.Stderr.Cut() != spool.CapNone {
		t.Fatalf("cuts %q %q %q", c.Stdout.Cut(), a.Stdout.Cut(), b.Stderr.Cut())
	}
	text := c.Stdout.Text()
	if !strings.Contains(text, "the first 10 bytes are at troupe://output/c/stdout") ||
		!strings.Contains(text, "output.max_session_spool_bytes = 100") || strings.Contains(text, "the whole") {
		t.Fatalf("text of the cut stream: %q", text)
	}
	// A stream that starts once the session is full keeps nothing and
	// offers no resource.
	d := create(t, store, "d")
	d.Stdout.Write(bytes.Repeat([]byte("d"), 20))
	if d.Stdout.Spooled() != 0 || d.Stdout.URI() != "" || d.Stdout.Cut() != spool.CapSession {
		t.Fatalf("d: spooled %d, uri %q, cut %q", d.Stdout.Spooled(), d.Stdout.URI(), d.Stdout.Cut())
	}
	if text := d.Stdout.Text(); !strings.Contains(text, "none of it was kept") || !strings.Contains(text, "max_session_spool_bytes") {
		t.Fatalf("text of a stream that kept nothing: %q", text)
	}
	if desc := c.Stdout.Describe(); !strings.Contains(desc, "first 10 of the 35 bytes") || !strings.Contains(desc, "max_session_spool_bytes") {
		t.Fatalf("description: %q", desc)
	}
	if got := store.Used(); got != 100 {
		t.Fatalf("store used %d", got)
	}
}

// The per-stream cap reports itself the same way.
func TestStreamCapMarker(t *testing.T) {
	store := spool.NewStore(t.TempDir(), spool.Limits{MaxFileBytes: 10, InlineBytes: 2})
	defer store.Close()
	o := create(t, store, "x")
	o.Stdout.Write(bytes.Repeat([]byte("z"), 25))
	o.Close()
	if o.Stdout.Cut() != spool.CapStream {
		t.Fatalf("cut %q", o.Stdout.Cut())
	}
	if text := o.Stdout.Text(); !strings.Contains(text, "the first 10 bytes are at troupe://output/x/stdout") ||
		!strings.Contains(text, "output.max_spool_bytes = 10") {
		t.Fatalf("text %q", text)
	}
	// Exactly the cap is no cut.
	e := create(t, store, "e")
	e.Stdout.Write(bytes.Repeat([]byte("z"), 10))
	if e.Stdout.Cut() != spool.CapNone || !strings.Contains(e.Stdout.Describe(), "whole") {
		t.Fatalf("a stream of exactly the cap: cut %q, %q", e.Stdout.Cut(), e.Stdout.Describe())
	}
}

// Stores of different sessions draw on one server-wide budget; closing a
// store gives its bytes back.
func TestServerCapAcrossStores(t *testing.T) {
	budget := spool.NewBudget(100)
	dir1, dir2 := t.TempDir(), t.TempDir()
	s1 := spool.NewStore(dir1, spool.Limits{InlineBytes: 4, MaxStoreBytes: 1000, Shared: budget})
	s2 := spool.NewStore(dir2, spool.Limits{InlineBytes: 4, MaxStoreBytes: 1000, Shared: budget})
	defer s2.Close()
	o1, o2 := create(t, s1, "one"), create(t, s2, "two")
	o1.Stdout.Write(bytes.Repeat([]byte("1"), 70))
	o2.Stdout.Write(bytes.Repeat([]byte("2"), 70))
	if o1.Stdout.Spooled() != 70 || o2.Stdout.Spooled() != 30 || budget.Used() != 100 {
		t.Fatalf("spooled %d and %d, budget used %d", o1.Stdout.Spooled(), o2.Stdout.Spooled(), budget.Used())
	}
	if o2.Stdout.Cut() != spool.CapServer || !strings.Contains(o2.Stdout.Text(), "output.max_total_spool_bytes = 100") {
		t.Fatalf("cut %q, text %q", o2.Stdout.Cut(), o2.Stdout.Text())
	}
	// The session's own budget got back what the server refused.
	if s2.Used() != 30 {
		t.Fatalf("store 2 holds %d bytes of budget, wrote 30", s2.Used())
	}
	if n := diskBytes(t, dir1) + diskBytes(t, dir2); n != 100 {
		t.Fatalf("%d bytes on disk, server cap 100", n)
	}
	o1.Close()
	if err := s1.Close(); err != nil {
		t.Fatal(err)
	}
	if budget.Used() != 30 {
		t.Fatalf("closing a store left the budget at %d, want 30", budget.Used())
	}
	o3 := create(t, s2, "three")
	o3.Stdout.Write(bytes.Repeat([]byte("3"), 70))
	if o3.Stdout.Spooled() != 70 || o3.Stdout.Cut() != spool.CapNone {
		t.Fatalf("after the other store closed: spooled %d, cut %q", o3.Stdout.Spooled(), o3.Stdout.Cut())
	}
}

// Evicted outputs give their bytes back, and a new call makes room for
// itself by evicting the oldest finished outputs (never running ones).
func TestEvictionReturnsBytes(t *testing.T) {
	budget := spool.NewBudget(1000)
	dir := t.TempDir()
	store := spool.NewStore(dir, spool.Limits{InlineBytes: 4, MaxFileBytes: 30, MaxStoreBytes: 100, Shared: budget})
	// A call may write 2×30 bytes, so a call starts with at most 40 bytes
	// of finished outputs in the store: c's start evicts a.
	for _, id := range []string{"a", "b", "c"} {
		o := create(t, store, id)
		o.Stdout.Write(bytes.Repeat([]byte(id), 30))
		o.Close()
	}
	if store.Used() != 60 || budget.Used() != 60 || diskBytes(t, dir) != 60 {
		t.Fatalf("used %d (store), %d (server), %d on disk", store.Used(), budget.Used(), diskBytes(t, dir))
	}
	d := create(t, store, "d") // evicts b
	if store.Used() != 30 || budget.Used() != 30 || diskBytes(t, dir) != 30 {
		t.Fatalf("after eviction: used %d (store), %d (server), %d on disk", store.Used(), budget.Used(), diskBytes(t, dir))
	}
	for id, want := range map[string]error{"a": spool.ErrNotFound, "b": spool.ErrNotFound, "c": nil} {
		if _, err := store.Read("troupe://output/" + id + "/stdout"); !errors.Is(err, want) {
			t.Errorf("%s: %v, want %v", id, err, want)
		}
	}
	d.Stdout.Write(bytes.Repeat([]byte("d"), 30))
	d.Stderr.Write(bytes.Repeat([]byte("e"), 30))
	if d.Stdout.Cut() != spool.CapNone || d.Stderr.Cut() != spool.CapNone {
		t.Fatalf("the new call was cut: %q %q", d.Stdout.Cut(), d.Stderr.Cut())
	}
	// Running outputs are never evicted: the next call makes room by
	// dropping c, not d, and then shares what is left.
	e := create(t, store, "e")
	if _, err := store.Read("troupe://output/d/stdout"); err != nil {
		t.Fatalf("a running output was evicted: %v", err)
	}
	e.Stdout.Write(bytes.Repeat([]byte("x"), 30))
	e.Stderr.Write(bytes.Repeat([]byte("y"), 30))
	if e.Stdout.Spooled() != 30 || e.Stderr.Spooled() != 10 || e.Stderr.Cut() != spool.CapSession {
		t.Fatalf("e: spooled %d and %d, cut %q", e.Stdout.Spooled(), e.Stderr.Spooled(), e.Stderr.Cut())
	}
	if err := store.Close(); err != nil {
		t.Fatal(err)
	}
	if budget.Used() != 0 {
		t.Fatalf("closed store left %d bytes charged to the server", budget.Used())
	}
	// Writes to captures of a closed store keep nothing and charge nothing.
	d.Stdout.Write([]byte("late"))
	if budget.Used() != 0 {
		t.Fatalf("a write after Close charged %d bytes", budget.Used())
	}
}

// Many writers in many stores at once never take more than the caps
// (run with -race): the reservations are atomic.
func TestConcurrentWritersStayWithinCaps(t *testing.T) {
	const (
		stores, outputs, writes, chunk = 4, 8, 100, 37
		storeMax, serverMax, fileMax   = 4000, 10000, 1000
	)
	budget := spool.NewBudget(serverMax)
	parent := t.TempDir()
	var all [][]*spool.Output
	var ss []*spool.Store
	var wg sync.WaitGroup
	for i := range stores {
		s := spool.NewStore(parent, spool.Limits{InlineBytes: 8, MaxFileBytes: fileMax, MaxStoreBytes: storeMax, Shared: budget})
		ss = append(ss, s)
		var outs []*spool.Output
		for j := range outputs {
			o := create(t, s, fmt.Sprintf("o%d", j))
			outs = append(outs, o)
			for _, c := range []*spool.Capture{o.Stdout, o.Stderr} {
				wg.Add(1)
				go func() {
					defer wg.Done()
					p := bytes.Repeat([]byte{byte('a' + i)}, chunk)
					for range writes {
						c.Write(p)
					}
				}()
			}
		}
		all = append(all, outs)
	}
	// Readers race the writers.
	for _, s := range ss {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for range 50 {
				for _, r := range s.List() {
					_, _ = s.Read(r.URI)
				}
			}
		}()
	}
	wg.Wait()
	var sum int64
	for i, outs := range all {
		var inStore int64
		for _, o := range outs {
			for _, c := range []*spool.Capture{o.Stdout, o.Stderr} {
				if c.Total() != writes*chunk {
					t.Fatalf("total %d", c.Total())
				}
				if c.Spooled() > fileMax || c.Cut() == spool.CapNone {
					t.Fatalf("spooled %d, cut %q", c.Spooled(), c.Cut())
				}
				inStore += c.Spooled()
			}
		}
		if inStore > storeMax || inStore != ss[i].Used() {
			t.Fatalf("store %d keeps %d bytes (it says %d), cap %d", i, inStore, ss[i].Used(), storeMax)
		}
		sum += inStore
	}
	// Demand is far above every cap, so the server's budget is exactly full.
	if sum != serverMax || budget.Used() != serverMax || diskBytes(t, parent) != serverMax {
		t.Fatalf("kept %d, budget used %d, on disk %d; cap %d", sum, budget.Used(), diskBytes(t, parent), serverMax)
	}
	for _, s := range ss {
		s.Close()
	}
	if budget.Used() != 0 || diskBytes(t, parent) != 0 {
		t.Fatalf("after Close: budget used %d, %d bytes on disk", budget.Used(), diskBytes(t, parent))
	}
}
