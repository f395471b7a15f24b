package mcphttp

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"os"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"

	"go.uber.org/goleak"

	"troupe/internal/leakcheck"
	"troupe/tools"
)

// loadClient speaks MCP over HTTP from many goroutines. Unlike rig's
// helpers it returns errors: t.Fatal belongs to the test's goroutine.
type loadClient struct {
	url    string
	client *http.Client
}

// post sends body and returns the status, the headers and the body read
// to its end.
func (c *loadClient) post(session, body, accept string) (int, http.Header, []byte, error) {
	req, err := http.NewRequest(http.MethodPost, c.url, strings.NewReader(body))
	if err != nil {
		return 0, nil, nil, err
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", accept)
	if session != "" {
		req.Header.Set("Mcp-Session-Id", session)
	}
	return c.send(req)
}

func (c *loadClient) send(req *http.Request) (int, http.Header, []byte, error) {
	resp, err := c.client.Do(req)
	if err != nil {
		return 0, nil, nil, err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	return resp.StatusCode, resp.Header, b, err
}

func (c *loadClient) initialize(version string) (string, error) {
	status, h, body, err := c.post("", initBody(version), acceptBoth)
	if err != nil {
		return "", err
	}
	id := h.Get("Mcp-Session-Id")
	if status != 200 || id == "" || !bytes.Contains(body, []byte(`"protocolVersion"`)) {
		return "", fmt.Errorf("initialize: %d %q %s", status, id, body)
	}
	status, _, body, err = c.post(id, `{"jsonrpc":"2.0","method":"notifications/initialized"}`, acceptBoth)
	if err != nil {
		return "", err
	}
	if status != 202 || len(body) != 0 {
		return "", fmt.Errorf("notifications/initialized: %d %s", status, body)
	}
	return id, nil
}

func (c *loadClient) delete(session string) error {
	req, err := http.NewRequest(http.MethodDelete, c.url, nil)
	if err != nil {
		return err
	}
	req.Header.Set("Mcp-Session-Id", session)
	status, _, body, err := c.send(req)
	if err == nil && status != 204 {
		err = fmt.Errorf("DELETE: %d %s", status, body)
	}
	return err
}

// echo calls the echo tool and checks the JSON answer.
func (c *loadClient) echo(session string, id int) error {
	status, h, body, err := c.post(session, callBody(id, "echo", fmt.Sprintf(`{"n":%d}`, id), nil), acceptBoth)
	if err != nil {
		return err
	}
	if status != 200 || h.Get("Content-Type") != "application/json" {
		return fmt.Errorf("echo %d: %d %q %s", id, status, h.Get("Content-Type"), body)
	}
	var m rpcMessage
	if err := json.Unmarshal(body, &m); err != nil || string(m.ID) != fmt.Sprint(id) ||
		!bytes.Contains(m.Result, []byte(fmt.Sprintf(`echo {\"n\":%d}`, id))) {
		return fmt.Errorf("echo %d: %s", id, body)
	}
	return nil
}

// progress calls the progress tool with a token and checks the SSE answer:
// progress, log, progress, then the response, with consecutive event ids.
func (c *loadClient) progress(session string, id int) error {
	status, h, body, err := c.post(session, callBody(id, "progress", "", fmt.Sprint("tok", id)), acceptBoth)
	if err != nil {
		return err
	}
	if status != 200 || h.Get("Content-Type") != "text/event-stream" {
		return fmt.Errorf("progress %d: %d %q %s", id, status, h.Get("Content-Type"), body)
	}
	rd := newSSEReader(bytes.NewReader(body))
	var kinds []string
	stream := ""
	for i := 1; ; i++ {
		e, ok, err := rd.next()
		if err != nil {
			return fmt.Errorf("progress %d: %v", id, err)
		}
		if !ok {
			break
		}
		s, seq, found := strings.Cut(e.ID, "-")
		if stream == "" {
			stream = s
		}
		if !found || s != stream || seq != fmt.Sprint(i) {
			return fmt.Errorf("progress %d: event id %q after stream %q, event %d", id, e.ID, stream, i)
		}
		var m rpcMessage
		if err := json.Unmarshal([]byte(e.Data), &m); err != nil {
			return fmt.Errorf("progress %d: %v", id, err)
		}
		if m.Method != "" {
			kinds = append(kinds, m.Method)
		} else if string(m.ID) == fmt.Sprint(id) && m.Error == nil {
			kinds = append(kinds, "response")
		} else {
			return fmt.Errorf("progress %d: unexpected %s", id, e.Data)
		}
	}
	if got := strings.Join(kinds, " "); got != "notifications/progress notifications/message notifications/progress response" {
		return fmt.Errorf("progress %d: events %q", id, got)
	}
	return nil
}

// liveHeap is the heap in use after the garbage collector has run: twice,
// so objects only reachable from sync.Pool victim caches are gone too.
func liveHeap() uint64 {
	var ms runtime.MemStats
	for range 3 {
		runtime.GC()
	}
	runtime.ReadMemStats(&ms)
	return ms.HeapAlloc
}

// reserveGoroutines runs n goroutines at once and lets them end. The
// runtime keeps the descriptor of every goroutine that ever existed (on
// free lists, for reuse), so the first time a test reaches a new peak of
// goroutines the heap grows by a few hundred bytes per goroutine for good.
// Reaching the peak before the baseline keeps that out of the comparison.
func reserveGoroutines(n int) {
	var started, done sync.WaitGroup
	release := make(chan struct{})
	for range n {
		started.Add(1)
		done.Go(func() {
			started.Done()
			<-release
		})
	}
	started.Wait()
	close(release)
	done.Wait()
}

// settle waits (up to 3 s) until no goroutine of an earlier test's actor
// system is left: protoactor's dead-letter throttle goroutine keeps its
// whole ActorSystem reachable for a second after the Host closed, and a
// heap baseline taken meanwhile would count memory that is about to go.
func settle() {
	buf := make([]byte, 1<<20)
	for end := time.Now().Add(3 * time.Second); time.Now().Before(end); time.Sleep(20 * time.Millisecond) {
		n := runtime.Stack(buf, true)
		if n < len(buf) && !bytes.Contains(buf[:n], []byte("asynkron/protoactor-go")) {
			return
		}
	}
}

// verifyNoLeaks waits for goroutines that end on their own and then checks
// that none but those in baseline is left. protoactor's dead-letter
// throttle runs a goroutine for one throttle interval (1 s) after a dead
// letter (late messages to stopped actors, which session ends produce by
// design); wait longer than goleak would.
func verifyNoLeaks(t *testing.T, baseline goleak.Option) {
	t.Helper()
	leakcheck.VerifyNone(t, baseline)
}

// TestLoad runs many sessions at once, each with concurrent calls (JSON
// answers and SSE answers with progress), under -race in the normal suite;
// then it ends every session and checks that nothing is left: no session,
// no goroutine, and no heap beyond the baseline.
func TestLoad(t *testing.T) {
	sessions := 200
	if testing.Short() {
		sessions = 50
	}
	const echoes, progresses = 3, 2
	settle()
	baseline := goleak.IgnoreCurrent()
	reserveGoroutines(40 * sessions)
	start0 := liveHeap()

	r := newRig(t, rigConfig{tools: []tools.Tool{echoTool(), progressTool()}})
	r.tr.MaxIdleConnsPerHost = 256
	c := &loadClient{url: r.url, client: r.client}

	// Warm up once, so what is built on first use (pools, the actor
	// system's registry shards, the transport) is part of the baseline.
	id, err := c.initialize("2025-06-18")
	if err != nil {
		t.Fatal(err)
	}
	if err := errors.Join(c.echo(id, 1), c.progress(id, 2), c.delete(id)); err != nil {
		t.Fatal(err)
	}
	r.tr.CloseIdleConnections()
	before := liveHeap()
	start := time.Now()

	ids := make([]string, sessions)
	errs := make(chan error, sessions*(echoes+progresses+1))
	var wg sync.WaitGroup
	for i := range sessions {
		wg.Go(func() {
			id, err := c.initialize([]string{"2025-03-26", "2025-06-18", "2025-11-25"}[i%3])
			if err != nil {
				errs <- err
				return
			}
			ids[i] = id
			var calls sync.WaitGroup
			for j := range echoes {
				calls.Go(func() {
					if err := c.echo(id, j); err != nil {
						errs <- fmt.Errorf("session %d: %w", i, err)
					}
				})
			}
			for j := range progresses {
				calls.Go(func() {
					if err := c.progress(id, echoes+j); err != nil {
						errs <- fmt.Errorf("session %d: %w", i, err)
					}
				})
			}
			calls.Wait()
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	if t.Failed() {
		t.FailNow()
	}
	if n := r.h.Sessions(); n != sessions {
		t.Fatalf("Sessions() = %d, want %d", n, sessions)
	}
	seen := map[string]bool{}
	for _, id := range ids {
		if seen[id] {
			t.Fatalf("session id %s given twice", id)
		}
		seen[id] = true
	}
	busy := time.Since(start)

	derrs := make(chan error, sessions)
	for _, id := range ids {
		wg.Go(func() {
			if err := c.delete(id); err != nil {
				derrs <- err
			}
		})
	}
	wg.Wait()
	close(derrs)
	for err := range derrs {
		t.Fatal(err)
	}
	if n := r.h.Sessions(); n != 0 {
		t.Fatalf("Sessions() = %d after deleting every session", n)
	}
	t.Logf("%d sessions × (%d JSON + %d SSE calls): %v; deleting them: %v",
		sessions, echoes, progresses, busy.Round(time.Millisecond), (time.Since(start) - busy).Round(time.Millisecond))

	// The live heap, with the Host still serving, is back near the
	// baseline. What may legitimately stay: protoactor's process registry
	// (1024 concurrent-map shards) keeps the capacity it grew to at the
	// peak (maps never shrink: tens of bytes per actor that existed at
	// once), as do the HTTP server's and transport's tables; together well
	// under 1 MiB here. The 2 MiB bound leaves room for GC timing. (Ended
	// sessions themselves must be gone: protoactor's child sets pin up to a
	// parent's peak number of children, which is why sessions are not the
	// server actor's children; see actors/server.go.)
	r.tr.CloseIdleConnections()
	serving := liveHeap()
	growth := int64(serving) - int64(before)
	t.Logf("live heap while serving: %d KiB before the sessions, %d KiB after they ended (%+d KiB)", before>>10, serving>>10, growth>>10)
	if growth > 2<<20 {
		t.Errorf("live heap grew by %d KiB after every session ended", growth>>10)
	}

	// Everything torn down and released: back to where the test began,
	// give or take the lazily built globals of the libraries (2 MiB).
	r.close()
	r.host, r.h, r.srv = nil, nil, nil
	verifyNoLeaks(t, baseline)
	end := liveHeap()
	t.Logf("live heap before the Host: %d KiB; after it closed: %d KiB", start0>>10, end>>10)
	if d := int64(end) - int64(start0); d > 2<<20 {
		t.Errorf("live heap grew by %d KiB over the whole test", d>>10)
	}
}

// TestIdleSessionMemory measures the memory an idle, initialized session
// holds: 10,000 sessions made through the real handler over loopback HTTP
// (initialize and notifications/initialized each), live heap before and
// after. It runs in the normal suite (a few seconds) and is skipped with
// -short unless TROUPE_MEASURE_SESSIONS=1. It prints
// "idle-session-bytes: N".
func TestIdleSessionMemory(t *testing.T) {
	if (testing.Short() || raceDetector) && os.Getenv("TROUPE_MEASURE_SESSIONS") != "1" {
		// Under -race the number means little and costs ~10 s; scripts/test
		// runs this test once more without -race to report it.
		t.Skip("-short or -race: set TROUPE_MEASURE_SESSIONS=1 to measure")
	}
	const sessions, workers = 10000, 8
	settle()
	// Logs go through a real handler (to nowhere) at the level troupe runs
	// with: a session's loggers carry pre-formatted attributes, which is
	// part of what a session costs in production.
	log := slog.New(slog.NewJSONHandler(io.Discard, &slog.HandlerOptions{Level: slog.LevelInfo}))
	r := newRig(t, rigConfig{opts: Options{MaxSessions: 2 * sessions, Logger: log}})
	r.tr.MaxIdleConnsPerHost = workers
	c := &loadClient{url: r.url, client: r.client}
	if _, err := c.initialize("2025-06-18"); err != nil { // warm-up, kept
		t.Fatal(err)
	}

	ids := make([]string, sessions)
	before := liveHeap()
	start := time.Now()
	var wg sync.WaitGroup
	errs := make(chan error, workers)
	for w := range workers {
		wg.Go(func() {
			for i := w; i < sessions; i += workers {
				id, err := c.initialize("2025-11-25")
				if err != nil {
					errs <- err
					return
				}
				ids[i] = id
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	took := time.Since(start)
	after := liveHeap()
	if n := r.h.Sessions(); n != sessions+1 {
		t.Fatalf("Sessions() = %d, want %d", n, sessions+1)
	}
	per := (int64(after) - int64(before)) / sessions
	t.Logf("%d idle sessions made in %v (%v per session over %d keep-alive connections); live heap %d → %d KiB",
		sessions, took.Round(time.Millisecond), (took / sessions).Round(time.Microsecond), workers, before>>10, after>>10)
	t.Logf("idle-session-bytes: %d", per)
	fmt.Printf("idle-session-bytes: %d\n", per)
	// Issue 16's bound: one actor per session, Props shared, no receiver
	// middleware on sessions, the version mirrored in an integer.
	if per > 1536 {
		t.Errorf("an idle session holds %d bytes; the bound is 1.5 KiB", per)
	}
	runtime.KeepAlive(ids)
}
