package app

import (
	"context"
	"encoding/json"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"troupe/downstream"
	"troupe/tools"
)

// hugeServer lists n resources in one page, or, with loop, pages that
// never end (each cursor names the next).
type hugeServer struct {
	resourceServer
	n     int
	loop  bool
	asked int
	items []json.RawMessage // made once: the page is asked for again
}

func (h *hugeServer) ListResources(_ context.Context, cursor string) (downstream.Page, error) {
	h.asked++
	if h.loop {
		n, _ := strconv.Atoi(cursor)
		return downstream.Page{Items: []json.RawMessage{json.RawMessage(fmt.Sprintf(`{"uri":"loop://%d","name":"n"}`, n))},
			NextCursor: strconv.Itoa(n + 1)}, nil
	}
	if h.items == nil {
		h.items = make([]json.RawMessage, h.n)
		for i := range h.items {
			h.items[i] = json.RawMessage(fmt.Sprintf(`{"uri":"huge://%d","name":"n"}`, i))
		}
	}
	return downstream.Page{Items: h.items}, nil
}

// listResourcesAll follows resources/list's cursors (at most limit pages)
// and returns the URIs in order and the largest page.
func listResourcesAll(t *testing.T, g *gateway, limit int) (uris []string, largest int, ended bool) {
	t.Helper()
	var cursor *string
	for range limit {
		params, _ := json.Marshal(map[string]any{"cursor": cursor})
		res, err := g.listResources(context.Background(), params)
		if err != nil {
			t.Fatal(err)
		}
		b, _ := json.Marshal(res)
		var page struct {
			Resources []struct {
				URI string `json:"uri"`
			} `json:"resources"`
			NextCursor string `json:"nextCursor"`
		}
		if err := json.Unmarshal(b, &page); err != nil {
			t.Fatal(err)
		}
		largest = max(largest, len(page.Resources))
		for _, r := range page.Resources {
			uris = append(uris, r.URI)
		}
		if page.NextCursor == "" {
			return uris, largest, true
		}
		cursor = &page.NextCursor
	}
	return uris, largest, false
}

// TestGatewayHugeServerPageIsSplit: a server page of 100,000 resources
// reaches the client as pages of at most maxListEntries, every entry once
// and in order, then the next server's; the server is asked once.
func TestGatewayHugeServerPageIsSplit(t *testing.T) {
	huge := &hugeServer{n: 100_000}
	after := &resourceServer{uris: []string{"z://after"}}
	g, _ := testGateway(tools.Policy{Allow: []string{"*"}}, gatewayServer{name: "a", src: huge}, gatewayServer{name: "b", src: after})
	uris, largest, ended := listResourcesAll(t, g, 1000)
	if !ended {
		t.Fatal("resources/list never ended")
	}
	if largest > maxListEntries {
		t.Fatalf("a page of %d entries, want at most %d", largest, maxListEntries)
	}
	if len(uris) != 100_001 || uris[0] != "huge://0" || uris[99_999] != "huge://99999" || uris[100_000] != "z://after" {
		t.Fatalf("got %d entries (first %q, last %q)", len(uris), uris[0], uris[len(uris)-1])
	}
	for i := range 100_000 {
		if uris[i] != "huge://"+strconv.Itoa(i) {
			t.Fatalf("entry %d is %q", i, uris[i])
		}
	}
	// The page is held while it is split, not asked for again each time.
	if huge.asked != 1 {
		t.Errorf("the server was asked %d times for its page", huge.asked)
	}
	if len(g.held) != 0 {
		t.Errorf("%d split pages still held after the last part", len(g.held))
	}
}

// TestGatewayEndlessCursorsEnd: a server whose pages never end is cut
// after maxServerPages of its pages, with a warning, and the list goes on
// to the next server.
func TestGatewayEndlessCursorsEnd(t *testing.T) {
	loop := &hugeServer{loop: true}
	after := &resourceServer{uris: []string{"z://after"}}
	g, logs := testGateway(tools.Policy{Allow: []string{"*"}}, gatewayServer{name: "a", src: loop}, gatewayServer{name: "b", src: after})
	uris, _, ended := listResourcesAll(t, g, maxServerPages+10)
	if !ended {
		t.Fatalf("resources/list never ended (%d server pages asked)", loop.asked)
	}
	if len(uris) != maxServerPages+1 || uris[len(uris)-1] != "z://after" {
		t.Fatalf("got %d entries, last %q", len(uris), uris[len(uris)-1])
	}
	if !strings.Contains(logs.String(), "pages") || !strings.Contains(logs.String(), "server=a") {
		t.Fatalf("no warning naming the server: %s", logs.String())
	}
}

// TestSubscriptionStormIsCoalesced: a server that sends 10,000
// notifications/resources/updated for a held URI at once reaches the
// holding session as a handful, the last of which is the latest; a URI
// nobody holds costs nothing.
func TestSubscriptionStormIsCoalesced(t *testing.T) {
	srv := &countingServer{resourceServer: resourceServer{uris: []string{"x://r"}}}
	g, _ := testGateway(tools.Policy{Allow: []string{"*"}}, gatewayServer{name: "s", src: srv})
	co := newCoalescer(50 * time.Millisecond)
	defer co.stop()
	ss := &subscriptions{g: g, byURI: map[string]*heldURI{}, notices: co}
	a := &fakeSession{id: "a"}
	if _, err := ss.subscribe(context.Background(), &tools.Request{Arguments: json.RawMessage(`{"uri":"x://r"}`), Session: a}); err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	for i := range 10_000 {
		ss.updated("s", json.RawMessage(fmt.Sprintf(`{"uri":"x://r","_meta":{"n":%d}}`, i)))
		ss.updated("s", json.RawMessage(fmt.Sprintf(`{"uri":"x://other%d"}`, i)))
	}
	// At most one per interval, plus the first and the trailing one.
	bound := int(time.Since(start)/(50*time.Millisecond)) + 3
	last := `notifications/resources/updated {"uri":"x://r","_meta":{"n":9999}}`
	deadline := time.Now().Add(5 * time.Second)
	for {
		told := a.heard()
		if len(told) > bound {
			t.Fatalf("the session was told %d times, want at most %d", len(told), bound)
		}
		if len(told) > 0 && told[len(told)-1] == last {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the latest update never came: %q", told)
		}
		time.Sleep(10 * time.Millisecond)
	}
	co.mu.Lock()
	n := len(co.keys)
	co.mu.Unlock()
	if n > 1 {
		t.Fatalf("the coalescer holds %d keys, want at most the held URI", n)
	}
}

// TestCoalescerBoundsAFlood: 10,000 list_changed at once pass as the
// first and one more after the interval; later ones pass again.
func TestCoalescerBoundsAFlood(t *testing.T) {
	co := newCoalescer(50 * time.Millisecond)
	defer co.stop()
	var mu sync.Mutex
	got := 0
	count := func() {
		mu.Lock()
		got++
		mu.Unlock()
	}
	seen := func() int {
		mu.Lock()
		defer mu.Unlock()
		return got
	}
	for range 10_000 {
		co.send("prompts", count)
	}
	if seen() != 1 {
		t.Fatalf("%d delivered at once, want 1", seen())
	}
	time.Sleep(200 * time.Millisecond)
	if seen() != 2 {
		t.Fatalf("%d delivered after the interval, want 2 (the first and the latest)", seen())
	}
	co.send("prompts", count)
	if seen() != 3 {
		t.Fatalf("a notification after a quiet interval was held back (%d delivered)", seen())
	}
}
