package mcphttp

import (
	"troupe/tools"

	"testing"
	"time"
)

// TestResumeBeforeTheNextEvent: a client resumes a dropped SSE answer
// while the call still runs and nothing new has come since its
// Last-Event-ID. The resumed stream must carry only what comes after that
// id, not replay the stream from its start.
func TestResumeBeforeTheNextEvent(t *testing.T) {
	started := make(chan struct{}, 1)
	release := make(chan struct{})
	r := newRig(t, rigConfig{tools: []tools.Tool{blockTool(started, nil, release)}})
	id := r.initialize("2025-06-18")

	resp := r.do("POST", id, callBody(1, "block", "", "tok"))
	if resp.StatusCode != 200 || resp.Header.Get("Content-Type") != "text/event-stream" {
		t.Fatalf("%d %v", resp.StatusCode, resp.Header)
	}
	first, ok, err := newSSEReader(resp.Body).next()
	if !ok || err != nil {
		t.Fatalf("first event: %v", err)
	}
	stream, seq := eventSeq(t, first.ID)
	resp.Body.Close() // drops the connection: not a cancellation
	<-started
	waitFor(t, 5*time.Second, "the POST handler to return", func() bool { return r.active.Load() == 0 })

	resp = r.do("GET", id, "", "Last-Event-ID", first.ID)
	if resp.StatusCode != 200 {
		t.Fatalf("resume: %d %s", resp.StatusCode, readAll(t, resp))
	}
	time.Sleep(50 * time.Millisecond) // the resumed stream waits: nothing new yet
	close(release)
	events := readEvents(t, resp.Body)
	resp.Body.Close()
	if len(events) != 2 {
		t.Fatalf("resumed %d events, want the 2 after %s: %v", len(events), first.ID, events)
	}
	for i, e := range events {
		if s, n := eventSeq(t, e.ID); s != stream || n != seq+1+i {
			t.Fatalf("resumed event id %q, want %s-%d", e.ID, stream, seq+1+i)
		}
	}
}
