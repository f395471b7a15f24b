package httptransport

import (
	"bytes"
	"context"
	"errors"
	"testing"
	"time"

	"github.com/sourcegraph/jsonrpc2"
)

// TestStreamStaysBoundedForAStalledReader: a producer that never waits and
// a reader that never reads must not grow memory past the stream's bounds;
// the stalled reader is told it lagged when it comes back.
func TestStreamStaysBoundedForAStalledReader(t *testing.T) {
	s := newStream("p1", 100, 64<<10)
	payload := bytes.Repeat([]byte("x"), 1024)
	for i := 0; i < 10000; i++ {
		s.append(payload, false, nil)
	}
	s.mu.Lock()
	n, size := len(s.events), s.bytes
	s.mu.Unlock()
	if n > 100 || size > 64<<10 {
		t.Fatalf("stream holds %d events, %d bytes; bounds are 100 events, 64 KiB", n, size)
	}
	if _, _, err := s.Read(context.Background(), 0, time.Millisecond); !errors.Is(err, ErrLagged) {
		t.Fatalf("a reader behind the buffer must get ErrLagged, got %v", err)
	}
	// A reader within the buffer gets the rest.
	last := s.next - 1
	events, _, err := s.Read(context.Background(), last-5, time.Millisecond)
	if err != nil || len(events) != 5 {
		t.Fatalf("want the last 5 events, got %d, %v", len(events), err)
	}
}

func TestStreamFinalEventIsAlwaysKept(t *testing.T) {
	s := newStream("p1", 2, 1<<20)
	for i := 0; i < 5; i++ {
		s.append([]byte("progress"), false, nil)
	}
	s.append([]byte("response"), true, nil)
	s.append([]byte("late"), false, nil) // after the final: ignored
	events, done, err := s.Read(context.Background(), 4, 0)
	if err != nil || !done || len(events) != 2 || !events[1].Final || string(events[1].Data) != "response" {
		t.Fatalf("got %+v done=%v err=%v", events, done, err)
	}
	if !s.Final() || s.Contains(0) {
		t.Fatal("final stream state wrong")
	}
}

func TestStreamReadWaitsAndHonoursContext(t *testing.T) {
	s := newStream("g1", 10, 1<<20)
	ctx, cancel := context.WithCancel(context.Background())
	go func() {
		time.Sleep(20 * time.Millisecond)
		s.append([]byte("a"), false, nil)
	}()
	events, _, err := s.Read(ctx, 0, 0)
	if err != nil || len(events) != 1 {
		t.Fatalf("read did not wake for an event: %v %v", events, err)
	}
	if events, done, err := s.Read(ctx, 1, 10*time.Millisecond); len(events) != 0 || done || err != nil {
		t.Fatalf("a wait with nothing new must time out empty: %v %v %v", events, done, err)
	}
	cancel()
	if _, _, err := s.Read(ctx, 1, 0); !errors.Is(err, context.Canceled) {
		t.Fatalf("want context.Canceled, got %v", err)
	}
	detach, err := s.Attach()
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.Attach(); !errors.Is(err, ErrReaderAttached) {
		t.Fatalf("second reader: %v", err)
	}
	detach()
	if d, err := s.Attach(); err != nil {
		t.Fatalf("attach after detach: %v", err)
	} else {
		d()
	}
	s.end(false)
	if _, done, _ := s.Read(context.Background(), 1, 0); !done {
		t.Fatal("an ended stream must report done")
	}
	if id := s.EventID(7); id != "g1-7" {
		t.Fatalf("EventID = %s", id)
	}
}

// The final event carries the error it answers with beside its bytes, so
// the HTTP front reads the status from it instead of decoding the data.
func TestStreamAnswerKeepsItsError(t *testing.T) {
	s := newStream("p1", 10, 1<<20)
	e := &jsonrpc2.Error{Code: -32021, Message: "needs elicitation"}
	s.answer([]byte(`{"error":{}}`), e, nil)
	events, done, err := s.Read(context.Background(), 0, 0)
	if err != nil || !done || len(events) != 1 || !events[0].Final || events[0].Error != e {
		t.Fatalf("got %+v done=%v err=%v", events, done, err)
	}
	r := newStream("p2", 10, 1<<20)
	r.answer([]byte(`{"result":{}}`), nil, nil)
	if events, _, _ := r.Read(context.Background(), 0, 0); len(events) != 1 || events[0].Error != nil {
		t.Fatalf("a result's event has an error: %+v", events)
	}
}
