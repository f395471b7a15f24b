package codexagent

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"syscall"
	"testing"
	"time"
)

// startTestClient starts app-server in a fresh CODEX_HOME (no model is
// needed for what these tests ask).
func startTestClient(t *testing.T, onRequest requestHandler) *appClient {
	t.Helper()
	bin := codexBinary(t)
	home, ws := t.TempDir(), t.TempDir()
	if err := os.WriteFile(filepath.Join(home, "config.toml"), []byte("model = \"scripted\"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	ts, err := Tools(testOptions(t, Options{Binary: bin, Workspace: ws,
		Env: map[string]string{"PATH": os.Getenv("PATH"), "HOME": home, "CODEX_HOME": home, "LANG": "C.UTF-8"}}))
	if err != nil {
		t.Fatal(err)
	}
	s := ts[0].(*codexTool).s
	codexHome, err := s.homes.newSession()
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	c, err := startAppClient(ctx, func() (*process, error) { return s.startCodex(codexHome, s.wsReal) }, onRequest, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.close(false) })
	return c
}

// TestAppClientConcurrentCalls sends many requests at once from many
// goroutines: each gets its own answer.
func TestAppClientConcurrentCalls(t *testing.T) {
	c := startTestClient(t, nil)
	if c.info.UserAgent == "" {
		t.Error("initialize gave no user agent")
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	var wg sync.WaitGroup
	errs := make(chan error, 40)
	for i := 0; i < 20; i++ {
		wg.Add(2)
		go func() {
			defer wg.Done()
			raw, err := c.call(ctx, "getAuthStatus", map[string]any{})
			var r map[string]any
			if err == nil {
				err = json.Unmarshal(raw, &r)
			}
			if _, ok := r["requiresOpenaiAuth"]; err == nil && !ok {
				err = fmt.Errorf("getAuthStatus answered %s", raw)
			}
			errs <- err
		}()
		go func() {
			defer wg.Done()
			raw, err := c.call(ctx, "config/read", map[string]any{})
			var r map[string]any
			if err == nil {
				err = json.Unmarshal(raw, &r)
			}
			if _, ok := r["config"]; err == nil && !ok {
				err = fmt.Errorf("config/read answered %s", raw)
			}
			errs <- err
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			t.Fatal(err)
		}
	}
	// A JSON-RPC error comes back as *rpcError.
	_, err := c.call(ctx, "thread/archive", map[string]any{"threadId": "00000000-0000-0000-0000-000000000000"})
	var re *rpcError
	if !errors.As(err, &re) || re.Code != -32600 {
		t.Fatalf("err = %v, want Codex's -32600", err)
	}
}

// TestAppClientSubscriptions: a thread's notifications reach the
// subscribers of that thread and the catch-all ones, not the others.
func TestAppClientSubscriptions(t *testing.T) {
	c := startTestClient(t, nil)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	all := c.subscribe("")
	defer c.unsubscribe(all)
	raw, err := c.call(ctx, "thread/start", map[string]any{})
	if err != nil {
		t.Fatal(err)
	}
	var r threadResponse
	_ = json.Unmarshal(raw, &r)
	mine, other := c.subscribe(r.Thread.ID), c.subscribe("00000000-0000-0000-0000-000000000000")
	// thread/started came before these subscribed; a name change comes after.
	if _, err := c.call(ctx, "thread/name/set", map[string]any{"threadId": r.Thread.ID, "name": "x"}); err != nil {
		t.Fatal(err)
	}
	got := func(s *subscription, method string) bool {
		wctx, cancel := context.WithTimeout(ctx, 5*time.Second)
		defer cancel()
		for {
			m, ok := s.next(wctx)
			if !ok {
				return false
			}
			if m.Method == method && threadOf(m.Params) == r.Thread.ID {
				return true
			}
		}
	}
	if !got(all, "thread/started") {
		t.Error("the catch-all subscriber missed thread/started")
	}
	if !got(mine, "thread/name/updated") {
		t.Error("the thread's subscriber missed thread/name/updated")
	}
	c.unsubscribe(other)
	if m, ok := other.next(ctx); ok {
		t.Errorf("another thread's subscriber got %s", m.Method)
	}
	c.unsubscribe(mine)
}

// TestSubscriptionDropsOldest: a subscriber that does not keep up loses
// the oldest notifications, never blocks the writer, and keeps the newest.
func TestSubscriptionDropsOldest(t *testing.T) {
	s := &subscription{ready: make(chan struct{}, 1)}
	for i := 0; i < subQueue+10; i++ {
		s.put(message{Method: fmt.Sprint(i)})
	}
	if s.dropped() != 10 {
		t.Fatalf("dropped %d, want 10", s.dropped())
	}
	m, ok := s.next(context.Background())
	if !ok || m.Method != "10" {
		t.Fatalf("first kept = %q, want 10", m.Method)
	}
	s.end()
	n := 1
	for {
		if _, ok := s.next(context.Background()); !ok {
			break
		}
		n++
	}
	if n != subQueue {
		t.Fatalf("kept %d, want %d", n, subQueue)
	}
}

// TestAppClientProcessDies: when Codex is killed, a pending call and
// later ones fail with errExited, subscriptions end, and close returns.
func TestAppClientProcessDies(t *testing.T) {
	c := startTestClient(t, nil)
	sub := c.subscribe("")
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	_ = syscall.Kill(-c.pid(), syscall.SIGKILL)
	_, err := c.call(ctx, "getAuthStatus", map[string]any{})
	if !errors.Is(err, errExited) {
		t.Fatalf("err = %v, want errExited", err)
	}
	// What Codex sent before it died may still be queued (it announces
	// things after initialize); then the subscription ends.
	drain, stop := context.WithTimeout(ctx, 10*time.Second)
	defer stop()
	ended := false
	for i := 0; i <= subQueue; i++ {
		if _, ok := sub.next(drain); !ok {
			ended = drain.Err() == nil // not merely given up on
			break
		}
	}
	if !ended {
		t.Error("a subscription outlived Codex")
	}
	if c.alive() {
		t.Error("alive after Codex died")
	}
	done := make(chan struct{})
	go func() { c.close(false); close(done) }()
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		t.Fatal("close did not return")
	}
}

// TestAppClientClose: a graceful close returns, and calls after it fail
// with errExited.
func TestAppClientClose(t *testing.T) {
	c := startTestClient(t, nil)
	done := make(chan struct{})
	go func() { c.close(true); close(done) }()
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		t.Fatal("close did not return")
	}
	if _, err := c.call(context.Background(), "getAuthStatus", nil); !errors.Is(err, errExited) {
		t.Fatalf("call after close: %v", err)
	}
}
