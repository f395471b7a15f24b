package actors

import (
	"sync/atomic"
	"testing"
	"time"
)

// hopBudget is the most mailbox deliveries one tools/call of an in-process
// tool that needs no approval may cost, from the line read to the line
// written (issue 16): every message any actor receives counts, system
// messages included.
const hopBudget = 6

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
	if per > hopBudget {
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
