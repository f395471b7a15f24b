package app

import (
	"context"
	"encoding/json"
	"slices"
	"sync"
	"testing"

	"troupe/tools"
)

// countingServer is a resourceServer that records subscribes and
// unsubscribes.
type countingServer struct {
	resourceServer
	mu          sync.Mutex
	subs, unsub []string
}

func (c *countingServer) Subscribe(_ context.Context, uri string) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.subs = append(c.subs, uri)
	return nil
}

func (c *countingServer) Unsubscribe(_ context.Context, uri string) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.unsub = append(c.unsub, uri)
	return nil
}

// fakeSession records what it is told.
type fakeSession struct {
	id   string
	mu   sync.Mutex // told from the coalescer's timers too
	told []string
}

// heard is what the session was told so far.
func (f *fakeSession) heard() []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	return slices.Clone(f.told)
}

func (f *fakeSession) ID() string           { return f.id }
func (f *fakeSession) Client() tools.Client { return nil }
func (f *fakeSession) Notify(method string, p any) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.told = append(f.told, method+" "+string(p.(json.RawMessage)))
}

// TestSubscriptionsHeldOnceForAllSessions: the first session's subscribe
// subscribes downstream, the second's does not; updates reach the
// holders only; the last to go (unsubscribe or its end) unsubscribes.
func TestSubscriptionsHeldOnceForAllSessions(t *testing.T) {
	srv := &countingServer{resourceServer: resourceServer{uris: []string{"x://r"}}}
	g, _ := testGateway(tools.Policy{Allow: []string{"*"}}, gatewayServer{name: "s", src: srv})
	ss := &subscriptions{g: g, byURI: map[string]*heldURI{}, watching: map[string]bool{}}
	ctx := context.Background()
	a, b, c := &fakeSession{id: "a"}, &fakeSession{id: "b"}, &fakeSession{id: "c"}
	call := func(f func(context.Context, *tools.Request) (any, error), s tools.Session) error {
		_, err := f(ctx, &tools.Request{Arguments: json.RawMessage(`{"uri":"x://r"}`), Session: s})
		return err
	}
	for _, s := range []tools.Session{a, b} {
		if err := call(ss.subscribe, s); err != nil {
			t.Fatal(err)
		}
	}
	if !slices.Equal(srv.subs, []string{"x://r"}) {
		t.Errorf("downstream subscribes: %q, want one", srv.subs)
	}
	ss.updated("s", json.RawMessage(`{"uri":"x://r"}`))
	ss.updated("other", json.RawMessage(`{"uri":"x://r"}`)) // not the server subscribed at
	if len(a.told) != 1 || len(b.told) != 1 || len(c.told) != 0 {
		t.Errorf("told a %q, b %q, c %q", a.told, b.told, c.told)
	}
	if err := call(ss.unsubscribe, a); err != nil || len(srv.unsub) != 0 {
		t.Errorf("the first to leave unsubscribed downstream: %v %q", err, srv.unsub)
	}
	ss.sessionEnded("b")
	ss.work.Wait()
	if !slices.Equal(srv.unsub, []string{"x://r"}) {
		t.Errorf("downstream unsubscribes after the last session ended: %q", srv.unsub)
	}
	if err := call(ss.subscribe, nil); err == nil {
		t.Error("a subscription without a session was taken")
	}
	ss.connected("s") // nothing held: nothing asked again
	ss.work.Wait()
	if len(srv.subs) != 1 {
		t.Errorf("subscribed again with nothing held: %q", srv.subs)
	}
}
