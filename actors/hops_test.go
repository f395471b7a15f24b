package actors

import (
	"context"
	"encoding/json"
	"sync/atomic"
	"testing"
	"time"

	"github.com/sourcegraph/jsonrpc2"

	"troupe/tools"
)

// hopBudget is the most mailbox deliveries one tools/call of an in-process
// tool that needs no approval may cost, from the line read to the line
// written (issue 16; 6 then, 4 since issue 25 measured it exactly): every
// message any actor receives counts, system
// messages included.
const hopBudget = 4

// hopNoise is how far above the budget a measured average may be:
// deliveries no call causes in steady state (the server's idle sweep, the
// dead-letter throttle, an invoker replaced under a loaded -race run: its
// spawn and stop are half a dozen system messages) now and then land in
// the window; 0.12 was seen. A call that costs one more delivery shows as a
// whole 1.
const hopNoise = 0.5

// TestHopBudgetStdio counts the deliveries of sequential calls over stdio,
// once the session has an idle invoker: a call spawns no actor and stops
// none.
func TestHopBudgetStdio(t *testing.T) {
	var n atomic.Int64
	c := newClient(t, Options{deliveries: &n}, echoTool())
	c.initialize("2025-06-18")
	c.request(1, "tools/call", map[string]any{"name": "echo"})
	c.recv() // warm: the session now keeps the call's invoker
	settle(&n)
	const calls = 50
	before := n.Load()
	for i := range calls {
		c.request(2+i, "tools/call", map[string]any{"name": "echo"})
		c.recv()
	}
	settle(&n)
	per := float64(n.Load()-before) / calls
	t.Logf("%.2f deliveries per call", per)
	if per > hopBudget+hopNoise {
		t.Fatalf("%.2f mailbox deliveries per call, budget %d", per, hopBudget)
	}
}

// settle waits until no delivery has happened for a while: the messages
// after an answer (a flush, a timer) are counted with its call.
func settle(n *atomic.Int64) {
	for last := n.Load(); ; {
		time.Sleep(20 * time.Millisecond)
		if cur := n.Load(); cur == last {
			return
		} else {
			last = cur
		}
	}
}

// TestHopBudgetHTTP counts the deliveries of sequential calls in an HTTP
// session, whose one actor routes the answers into the POST streams
// itself.
func TestHopBudgetHTTP(t *testing.T) {
	var n atomic.Int64
	reg, err := tools.NewRegistry(echoTool())
	if err != nil {
		t.Fatal(err)
	}
	host := NewHost(Options{Logger: testLogger(t), deliveries: &n, Session: SessionOptions{Registry: reg}})
	defer host.Close(5 * time.Second)
	s, err := host.StartHTTPSession("s-hops", nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	call := func(id int, method string, params string) {
		t.Helper()
		raw := json.RawMessage(params)
		st := s.Request(host.ReadRequest(&jsonrpc2.Request{ID: jsonrpc2.ID{Num: uint64(id)}, Method: method, Params: &raw}, false), true, true)
		for after := uint64(0); ; {
			events, done, err := st.Read(context.Background(), after, 5*time.Second)
			if err != nil || (done && len(events) == 0) {
				t.Fatalf("%s: no answer (%v)", method, err)
			}
			for _, e := range events {
				if e.Final {
					s.Delivered(st)
					return
				}
				after = e.Seq
			}
		}
	}
	call(1, "initialize", `{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"t","version":"1"}}`)
	s.Notify(host.ReadRequest(&jsonrpc2.Request{Method: "notifications/initialized", Notif: true}, false))
	call(2, "tools/call", `{"name":"echo"}`) // warm: the session keeps the invoker
	settle(&n)
	const calls = 50
	before := n.Load()
	for i := range calls {
		call(3+i, "tools/call", `{"name":"echo"}`)
	}
	settle(&n)
	per := float64(n.Load()-before) / calls
	t.Logf("%.2f deliveries per call", per)
	// A JSON answer is forgotten as it is sent (no streamDelivered): the
	// HTTP call costs one delivery less than stdio's (no flushOutput).
	if per > hopBudget-1+hopNoise {
		t.Fatalf("%.2f mailbox deliveries per call over HTTP, budget %d", per, hopBudget-1)
	}
}
