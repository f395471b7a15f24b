package audit

import (
	"bytes"
	"log/slog"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"
)

// A burst of records given from several goroutines is written in a few
// batches, not one write per record, and every record is in the log, in
// one unbroken chain, once Close returns.
func TestWriterGroupCommits(t *testing.T) {
	l, path := newLog(t)
	var mu sync.Mutex
	batches, written := 0, 0
	w := NewWriter(l, nil, func(records int, took time.Duration) {
		mu.Lock()
		defer mu.Unlock()
		batches++
		written += records
	})
	const goroutines, each = 8, 250
	var wg sync.WaitGroup
	for g := range goroutines {
		wg.Go(func() {
			for i := range each {
				r := call(g*each + i)
				w.Record(&r)
			}
		})
	}
	wg.Wait()
	w.Close()
	mustVerify(t, path, goroutines*each)
	mu.Lock()
	defer mu.Unlock()
	if written != goroutines*each {
		t.Fatalf("the callback was told of %d records, want %d", written, goroutines*each)
	}
	if batches > goroutines*each/10 {
		t.Fatalf("%d records took %d writes: they were not group-committed", written, batches)
	}
}

// Records from one goroutine reach the log in the order they were given,
// across batches (one full batch written at once, the rest by the timer).
func TestWriterKeepsOrder(t *testing.T) {
	l, path := newLog(t)
	w := NewWriter(l, nil, nil)
	const n = maxBatch + 100
	for i := range n {
		r := call(i)
		w.Record(&r)
	}
	time.Sleep(10 * FlushDelay) // the timer writes the rest
	mustVerify(t, path, n)
	for i, line := range lines(t, path) {
		if want := `"tool":"t` + strconv.Itoa(i) + `"`; !strings.Contains(line, want) {
			t.Fatalf("line %d is not record %d: %s", i, i, line)
		}
	}
	w.Close()
}

// A record given after Close (a call that ended after the server began
// to stop) is written at once rather than lost.
func TestWriterAfterClose(t *testing.T) {
	l, path := newLog(t)
	w := NewWriter(l, nil, nil)
	r := call(0)
	w.Record(&r)
	w.Close()
	mustVerify(t, path, 1)
	r = call(1)
	w.Record(&r)
	mustVerify(t, path, 2)
}

// A failed write is logged once, not once per batch, until a write
// succeeds again; the callback hears only of batches written.
func TestWriterLogsAFailureOnce(t *testing.T) {
	l, path := newLog(t)
	var logs bytes.Buffer
	flushed := 0
	w := NewWriter(l, slog.New(slog.NewTextHandler(&logs, nil)), func(int, time.Duration) { flushed++ })
	w.Close()       // every record is then written at once: no timer in the way
	bad := Record{} // no event: the log refuses it
	for range 3 {
		w.Record(&bad)
	}
	if got := strings.Count(logs.String(), "audit log write failed"); got != 1 {
		t.Fatalf("3 failed writes logged %d times:\n%s", got, logs.String())
	}
	good := call(0)
	w.Record(&good)
	w.Record(&bad)
	if got := strings.Count(logs.String(), "audit log write failed"); got != 2 {
		t.Fatalf("a failure after a success logged %d times in all, want 2:\n%s", got, logs.String())
	}
	if flushed != 1 {
		t.Fatalf("the callback heard of %d batches, want the 1 written", flushed)
	}
	mustVerify(t, path, 1)
}
