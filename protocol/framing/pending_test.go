package framing

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"log/slog"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/sourcegraph/jsonrpc2"
)

// These tests cover the stream's back-pressure (Options.MaxPending): which
// messages take room, what gives it back, and that a waiting reader always
// gets going again. They observe the wait through the stream's own debug
// record ("input paused"), not through timing.

// pauses is a slog handler that reports each "input paused" record.
type pauses chan int

func (p pauses) Enabled(context.Context, slog.Level) bool { return true }
func (p pauses) WithAttrs([]slog.Attr) slog.Handler       { return p }
func (p pauses) WithGroup(string) slog.Handler            { return p }
func (p pauses) Handle(_ context.Context, r slog.Record) error {
	if strings.Contains(r.Message, "input paused") {
		owed := -1
		r.Attrs(func(a slog.Attr) bool {
			if a.Key == "owed" {
				owed = int(a.Value.Int64())
			}
			return true
		})
		p <- owed
	}
	return nil
}

// lockedBuffer is the stream's output, read by the test while the reader
// goroutine may write to it.
type lockedBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (w *lockedBuffer) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.b.Write(p)
}

func (w *lockedBuffer) String() string {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.b.String()
}

// delivery is one ReadMessage result and the test's stage when it returned.
type delivery struct {
	msg   Message
	err   error
	stage int32
}

// reader runs ReadMessage in a goroutine until it fails, as the
// connection's read loop does, noting the test's stage at each return.
func reader(s *Stream, stage *atomic.Int32) <-chan delivery {
	out := make(chan delivery, 64)
	go func() {
		defer close(out)
		for {
			m, err := s.ReadMessage()
			out <- delivery{msg: m, err: err, stage: stage.Load()}
			if err != nil {
				return
			}
		}
	}()
	return out
}

// liveness bounds how long a test waits for something that must happen;
// it only turns a hang into a failure, it asserts no speed.
const liveness = 10 * time.Second

func nextDelivery(t *testing.T, ch <-chan delivery) delivery {
	t.Helper()
	select {
	case d, ok := <-ch:
		if !ok {
			t.Fatal("the reader ended")
		}
		return d
	case <-time.After(liveness):
		t.Fatal("the reader is stuck")
	}
	return delivery{}
}

func waitPause(t *testing.T, p pauses) int {
	t.Helper()
	select {
	case owed := <-p:
		return owed
	case <-time.After(liveness):
		t.Fatal("the reader never paused")
	}
	return 0
}

func request(id int) string {
	return `{"jsonrpc":"2.0","id":` + strconv.Itoa(id) + `,"method":"ping"}`
}

func num(id int) jsonrpc2.ID { return jsonrpc2.ID{Num: uint64(id)} }

// TestReaderWaitsWhileAnswersAreOwed: with room for 4, the reader takes 4
// requests (a notification between them takes no room) and waits. It goes
// on only when answers are written or skipped, down to half the bound: a
// queued answer counts once flushed, not before.
func TestReaderWaitsWhileAnswersAreOwed(t *testing.T) {
	input := strings.Join([]string{request(1), request(2), `{"jsonrpc":"2.0","method":"notifications/x"}`,
		request(3), request(4), request(5), request(6)}, "\n") + "\n"
	p := make(pauses, 8)
	var out lockedBuffer
	s := New(strings.NewReader(input), &out, Options{MaxPending: 4, Logger: slog.New(p)})
	var stage atomic.Int32
	got := reader(s, &stage)
	for range 5 {
		if d := nextDelivery(t, got); d.err != nil {
			t.Fatal(d.err)
		}
	}
	if owed := waitPause(t, p); owed != 4 || s.Pending() != 4 {
		t.Fatalf("paused owing %d (Pending %d), want 4", owed, s.Pending())
	}
	stage.Store(1)
	if err := s.WriteObject(resp(1)); err != nil { // 3 owed: above half, still waiting
		t.Fatal(err)
	}
	stage.Store(2)
	if err := s.Queue(resp(2)); err != nil { // queued, not written: still 3
		t.Fatal(err)
	}
	if s.Pending() != 3 {
		t.Fatalf("Pending %d after one answer written and one queued, want 3", s.Pending())
	}
	stage.Store(3)
	if err := s.Flush(); err != nil { // 2 owed: the reader goes on
		t.Fatal(err)
	}
	if d := nextDelivery(t, got); d.err != nil || d.msg.Request.ID != num(5) || d.stage != 3 {
		t.Fatalf("got %+v at stage %d; want request 5, read only after the flush (stage 3)", d.msg.Request, d.stage)
	}
	if d := nextDelivery(t, got); d.err != nil || d.msg.Request.ID != num(6) {
		t.Fatalf("got %+v, want request 6", d)
	}
	// 4 owed again (3, 4, 5, 6): the reader waits before looking for more.
	if owed := waitPause(t, p); owed != 4 {
		t.Fatalf("paused owing %d, want 4", owed)
	}
	stage.Store(4)
	s.Skip(num(3)) // cancelled: never answered, no longer owed
	stage.Store(5)
	s.Skip(num(4))
	if d := nextDelivery(t, got); !errors.Is(d.err, io.EOF) || d.stage != 5 {
		t.Fatalf("got %+v at stage %d; want the end of input, after the second skip (stage 5)", d.err, d.stage)
	}
	if s.Pending() != 2 {
		t.Fatalf("Pending %d, want 2 (requests 5 and 6)", s.Pending())
	}
}

// TestOnlyRequestsTakeRoom: notifications and the client's responses need
// no answer; the server's own notifications and requests answer nothing.
func TestOnlyRequestsTakeRoom(t *testing.T) {
	input := strings.Join([]string{
		request(1),
		`{"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":9}}`,
		`{"jsonrpc":"2.0","id":"e1","result":{"action":"accept"}}`,
		request(2),
		`{"jsonrpc":"2.0","id":3,"method":"ping"`, // unparsable: the stream answers it itself
	}, "\n") + "\n"
	var out lockedBuffer
	s := New(strings.NewReader(input), &out, Options{MaxPending: 100})
	for {
		if _, err := s.ReadMessage(); err != nil {
			break
		}
	}
	if s.Pending() != 2 {
		t.Fatalf("Pending %d, want 2", s.Pending())
	}
	params := json.RawMessage(`{"progressToken":1,"progress":1}`)
	if err := s.WriteObject(&jsonrpc2.Request{Method: "notifications/progress", Params: &params, Notif: true}); err != nil {
		t.Fatal(err)
	}
	if err := s.WriteObject(&jsonrpc2.Request{Method: "elicitation/create", ID: jsonrpc2.ID{Num: 1}}); err != nil {
		t.Fatal(err)
	}
	if s.Pending() != 2 {
		t.Fatalf("Pending %d after the server's own messages, want still 2", s.Pending())
	}
	if err := s.WriteObject(resp(1)); err != nil {
		t.Fatal(err)
	}
	if s.Pending() != 1 {
		t.Fatalf("Pending %d after one answer, want 1", s.Pending())
	}
}

// TestBatchIsHandedOnWholeAndOwedUntilWritten: a batch's members are
// handed on even past the bound (their answers go out together, so holding
// some back would wait forever), and its answers count as written only
// when the batch's array is. A skipped member frees its room at once.
func TestBatchIsHandedOnWholeAndOwedUntilWritten(t *testing.T) {
	input := `[` + request(1) + `,` + request(2) + `,{"jsonrpc":"2.0","method":"notifications/x"},` +
		request(3) + `,` + request(4) + `,{"jsonrpc":"1.0","id":5,"method":"ping"}]` + "\n" + request(6) + "\n"
	p := make(pauses, 8)
	var out lockedBuffer
	s := New(strings.NewReader(input), &out, Options{MaxPending: 2, Logger: slog.New(p)})
	s.SetBatches(true)
	var stage atomic.Int32
	got := reader(s, &stage)
	for range 5 { // 4 requests and a notification; the invalid member is answered by the stream
		if d := nextDelivery(t, got); d.err != nil {
			t.Fatal(d.err)
		}
	}
	if owed := waitPause(t, p); owed != 4 {
		t.Fatalf("paused owing %d, want the batch's 4 requests", owed)
	}
	for _, id := range []int{1, 2} {
		if err := s.WriteObject(resp(uint64(id))); err != nil {
			t.Fatal(err)
		}
	}
	if s.Pending() != 4 || out.String() != "" {
		t.Fatalf("Pending %d, output %q: answers of an incomplete batch must stay owed and unwritten", s.Pending(), out.String())
	}
	s.Skip(num(3))
	if s.Pending() != 3 {
		t.Fatalf("Pending %d after a skip, want 3", s.Pending())
	}
	stage.Store(1)
	if err := s.WriteObject(resp(4)); err != nil { // completes the batch
		t.Fatal(err)
	}
	if strings.Count(out.String(), "\n") != 1 || !strings.HasPrefix(out.String(), "[") {
		t.Fatalf("output %q: want the whole batch written as one line", out.String())
	}
	if d := nextDelivery(t, got); d.err != nil || d.msg.Request.ID != num(6) || d.stage != 1 {
		t.Fatalf("got %+v at stage %d; want request 6 after the batch was written", d.msg.Request, d.stage)
	}
	if s.Pending() != 1 {
		t.Fatalf("Pending %d, want 1 (request 6; the batch is written)", s.Pending())
	}
}

// TestCloseWriteReleasesAWaitingReader: once the output is closed nothing
// owed can be written, so a reader waiting for room ends, though its input
// stays open.
func TestCloseWriteReleasesAWaitingReader(t *testing.T) {
	pr, pw := io.Pipe()
	defer pw.Close()
	go func() { _, _ = io.WriteString(pw, request(1)+"\n"+request(2)+"\n") }()
	p := make(pauses, 8)
	s := New(pr, io.Discard, Options{MaxPending: 1, Logger: slog.New(p)})
	var stage atomic.Int32
	got := reader(s, &stage)
	if d := nextDelivery(t, got); d.err != nil {
		t.Fatal(d.err)
	}
	waitPause(t, p)
	if err := s.CloseWrite(); err != nil {
		t.Fatal(err)
	}
	if d := nextDelivery(t, got); !errors.Is(d.err, io.ErrClosedPipe) {
		t.Fatalf("got %+v, want io.ErrClosedPipe", d)
	}
}

// failingWriter is an output whose reader has gone.
type failingWriter struct{}

func (failingWriter) Write([]byte) (int, error) { return 0, io.ErrClosedPipe }

// TestFailedWritesStillGiveRoom: an answer lost with the output is no
// longer owed either; counting it would stop the reader for good.
func TestFailedWritesStillGiveRoom(t *testing.T) {
	s := New(strings.NewReader(request(1)+"\n"+request(2)+"\n"), failingWriter{}, Options{MaxPending: 10})
	for range 2 {
		if _, err := s.ReadMessage(); err != nil {
			t.Fatal(err)
		}
	}
	if err := s.WriteObject(resp(1)); err == nil {
		t.Fatal("the write did not fail")
	}
	if s.Pending() != 1 {
		t.Fatalf("Pending %d, want 1", s.Pending())
	}
}

// TestNoBoundByDefault: without MaxPending the stream never waits (a
// client's stream, whose reader is not a server) and counts nothing.
func TestNoBoundByDefault(t *testing.T) {
	var b strings.Builder
	for i := range 50 {
		b.WriteString(request(i) + "\n")
	}
	s := New(strings.NewReader(b.String()), io.Discard, Options{})
	n := 0
	for {
		if _, err := s.ReadMessage(); err != nil {
			break
		}
		n++
	}
	if n != 50 || s.Pending() != 0 {
		t.Fatalf("read %d of 50, Pending %d", n, s.Pending())
	}
}

// TestResumeAtLeavesRoomForCallsInFlight: three calls stay owed (they wait
// for the client's answer to an elicitation); a burst of one more request
// pauses the reader. Once that one is answered, the reader must read again
// although the calls are still owed, or the client's answer they wait for
// would never be read.
func TestResumeAtLeavesRoomForCallsInFlight(t *testing.T) {
	input := strings.Join([]string{request(1), request(2), request(3), request(4),
		`{"jsonrpc":"2.0","id":"elicit-1","result":{"action":"accept"}}`}, "\n") + "\n"
	p := make(pauses, 8)
	s := New(strings.NewReader(input), io.Discard, Options{MaxPending: 4, ResumeAt: 3, Logger: slog.New(p)})
	var stage atomic.Int32
	got := reader(s, &stage)
	for range 4 {
		if d := nextDelivery(t, got); d.err != nil {
			t.Fatal(d.err)
		}
	}
	waitPause(t, p)
	stage.Store(1)
	if err := s.WriteObject(resp(4)); err != nil { // the quick one; 1–3 stay owed
		t.Fatal(err)
	}
	if d := nextDelivery(t, got); d.err != nil || d.msg.Response == nil || d.stage != 1 {
		t.Fatalf("got %+v at stage %d; want the client's answer, read once only the calls are owed", d, d.stage)
	}
}
