package e2e

import (
	"fmt"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// TestGatewayHostileServer: behind troupe, a server whose resources/list
// page holds 100,000 resources reaches the client as pages of at most
// 1,000, every resource once; its storm of 10,000 resources/updated and
// 20,000 list_changed after a subscribe reaches the session as a few
// notifications, the last update the latest.
func TestGatewayHostileServer(t *testing.T) {
	requireDownstream(t)
	fx := newFixture(t)
	table := stdioServerTable("hostile", nodeBinary(t), []string{filepath.Join(moduleRoot, "e2e", "downstream", "hostile.mjs")}, "")
	s := startServer(t, fx.dir, "--config", downstreamConfig(t, table))
	s.initializeAs(`{}`)

	total, cursor := 0, ""
	for page := 0; ; page++ {
		if page > 200 {
			t.Fatal("resources/list never ends")
		}
		params := `{}`
		if cursor != "" {
			params = `{"cursor":"` + cursor + `"}`
		}
		s.send(fmt.Sprintf(`{"jsonrpc":"2.0","id":%d,"method":"resources/list","params":%s}`, 100+page, params))
		// The first page makes troupe read the server's whole page of
		// 100,000 (about 20 s under the race detector on a busy machine).
		m := s.recvWithin(90 * time.Second)
		for m["id"] == nil {
			m = s.recvWithin(90 * time.Second)
		}
		res, _ := m["result"].(map[string]any)
		if res == nil {
			t.Fatalf("resources/list: %v", m)
		}
		list, _ := res["resources"].([]any)
		if len(list) > 1000 {
			t.Fatalf("a page of %d resources", len(list))
		}
		for _, r := range list {
			if uri, _ := r.(map[string]any)["uri"].(string); strings.HasPrefix(uri, "hostile://r/") {
				if want := fmt.Sprintf("hostile://r/%06d", total); uri != want {
					t.Fatalf("resource %d is %s, want %s", total, uri, want)
				}
				total++
			}
		}
		next, _ := res["nextCursor"].(string)
		if next == "" {
			break
		}
		cursor = next
	}
	if total != 100_000 {
		t.Fatalf("%d resources listed, want 100,000", total)
	}

	start := time.Now()
	s.send(`{"jsonrpc":"2.0","id":"sub","method":"resources/subscribe","params":{"uri":"hostile://r/000000"}}`)
	if m := s.recvResponse(); m["error"] != nil {
		t.Fatalf("resources/subscribe: %v", m)
	}
	counts := map[string]int{}
	lastSeq := -1.0
	deadline := time.After(10 * time.Second)
	quiet := time.NewTimer(time.Second)
	defer quiet.Stop()
	for lastSeq != 9999 {
		select {
		case l := <-s.lines:
			var method string
			if i := strings.Index(l, `"method":"`); i >= 0 {
				method, _, _ = strings.Cut(l[i+len(`"method":"`):], `"`)
			}
			counts[method]++
			if method == "notifications/resources/updated" {
				var seq float64
				if j := strings.Index(l, `"seq":`); j >= 0 {
					_, _ = fmt.Sscanf(l[j+len(`"seq":`):], "%g", &seq)
				}
				lastSeq = seq
			}
		case <-deadline:
			t.Fatalf("the latest update never came (last seq %v; %v)", lastSeq, counts)
		}
	}
	// A bound: one per 100 ms for each kind, plus the first and the last.
	bound := int(time.Since(start)/(100*time.Millisecond)) + 3
	for _, m := range []string{"notifications/resources/updated", "notifications/prompts/list_changed", "notifications/resources/list_changed"} {
		if counts[m] > bound {
			t.Errorf("%d of %s, want at most %d", counts[m], m, bound)
		}
	}
	t.Logf("notifications in %v: %v", time.Since(start), counts)
}
