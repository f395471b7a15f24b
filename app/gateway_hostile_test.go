package app

import (
	"context"
	"encoding/json"
	"fmt"
	"strconv"
	"strings"
	"testing"

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
// and in order, then the next server's.
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
