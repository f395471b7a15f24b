package actors

import (
	"bufio"
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"go.uber.org/goleak"

	"troupe/internal/leakcheck"
)

// pauseSignal is a slog handler that reports the stream's "input paused"
// record (the read loop waits for the client to read) and passes every
// record on to next.
type pauseSignal struct {
	next   slog.Handler
	paused chan struct{}
}

func (h pauseSignal) Enabled(ctx context.Context, l slog.Level) bool { return true }
func (h pauseSignal) WithAttrs(a []slog.Attr) slog.Handler {
	return pauseSignal{next: h.next.WithAttrs(a), paused: h.paused}
}
func (h pauseSignal) WithGroup(g string) slog.Handler {
	return pauseSignal{next: h.next.WithGroup(g), paused: h.paused}
}
func (h pauseSignal) Handle(ctx context.Context, r slog.Record) error {
	if strings.Contains(r.Message, "input paused") {
		select {
		case h.paused <- struct{}{}:
		default:
		}
	}
	if h.next.Enabled(ctx, r.Level) {
		return h.next.Handle(ctx, r)
	}
	return nil
}

// flood writes n pings to w, one write per line, counting those written.
// It is a named function so the leak check can tell it from the server's
// goroutines while it still blocks on a server that no longer reads.
func flood(w io.Writer, n int, sent *atomic.Int64, done chan<- error) {
	for i := range n {
		if _, err := io.WriteString(w, `{"jsonrpc":"2.0","id":`+strconv.Itoa(i)+`,"method":"ping"}`+"\n"); err != nil {
			done <- err
			return
		}
		sent.Add(1)
	}
	done <- nil
}

// TestConnectionStopsReadingWhileTheClientDoesNot floods a stdio
// connection with pings while reading none of its output: the read loop
// must pause (troupe stops reading its input), and then, depending on how
// the client goes on, every request read is answered exactly once
// (resume), the shutdown still completes (drain), or the connection ends
// although its input stays open (gone: the client closed its end of
// stdout). No goroutine outlives any of them.
func TestConnectionStopsReadingWhileTheClientDoesNot(t *testing.T) {
	const pings = 3000 // ~130 KB: more than the stream's read buffer holds with the bound's requests
	for _, end := range []string{"resume", "drain", "gone"} {
		t.Run(end, func(t *testing.T) {
			baseline := goleak.IgnoreCurrent()
			paused := make(chan struct{}, 1)
			host := NewHost(Options{Session: SessionOptions{MaxInFlight: 4},
				Logger: slog.New(pauseSignal{next: testLogger(t).Handler(), paused: paused})})
			inR, inW := io.Pipe()
			outR, outW := io.Pipe()
			conn, err := host.ServeStream(inR, outW)
			if err != nil {
				t.Fatal(err)
			}
			out := bufio.NewReader(outR)
			readLine := func() (msg, error) {
				line, err := out.ReadBytes('\n')
				if err != nil {
					return msg{}, err
				}
				var m msg
				if err := json.Unmarshal(line, &m); err != nil {
					t.Fatalf("server wrote %q: %v", line, err)
				}
				return m, nil
			}
			if _, err := io.WriteString(inW, `{"jsonrpc":"2.0","id":"init","method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"test","version":"1"}}}`+"\n"+
				`{"jsonrpc":"2.0","method":"notifications/initialized"}`+"\n"); err != nil {
				t.Fatal(err)
			}
			if m, err := readLine(); err != nil || string(m.ID) != `"init"` {
				t.Fatalf("initialize: %+v %v", m, err)
			}

			var sent atomic.Int64
			flooded := make(chan error, 1)
			go flood(inW, pings, &sent, flooded)
			select {
			case <-paused:
			case <-time.After(10 * time.Second):
				t.Fatal("the read loop never paused")
			}
			if n := sent.Load(); n >= pings {
				t.Fatalf("all %d pings were read although the client reads nothing", n)
			}

			answered := map[string]int{}
			readAll := func() {
				for {
					m, err := readLine()
					if err != nil {
						return // the output closed
					}
					if m.ID != nil {
						answered[string(m.ID)]++
						if answered[string(m.ID)] > 1 {
							t.Fatalf("id %s answered twice", m.ID)
						}
					}
					if end == "resume" && len(answered) == pings {
						return
					}
				}
			}
			switch end {
			case "resume":
				readAll()
				if err := <-flooded; err != nil {
					t.Fatalf("writing pings: %v", err)
				}
				flooded <- nil // for the end of the test
				inW.Close()
			case "drain":
				host.Drain()
				readAll() // until the connection closes its output
				inW.Close()
			case "gone":
				host.Drain()
				outR.Close() // nobody will ever read: writes fail
			}
			select {
			case <-conn.Done():
			case <-time.After(10 * time.Second):
				t.Fatal("the connection did not end")
			}
			if !host.Close(5 * time.Second) {
				t.Fatal("tool goroutines still running after Close")
			}
			// protoactor's dead-letter throttle goroutine lingers for a
			// second after a dead letter (see TestNoGoroutineLeaks).
			ignore := []goleak.Option{baseline, goleak.IgnoreAnyFunction("troupe/actors.flood")}
			leakcheck.VerifyNone(t, ignore...)
			inW.Close() // the flood, if still blocked, ends now
			<-flooded
		})
	}
}
