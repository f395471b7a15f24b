//go:build !race

// Two real remotes in one binary: without -race, as tunnel_test.go says.

package cluster

import (
	"fmt"
	"testing"
	"time"

	pcluster "github.com/asynkron/protoactor-go/cluster"
)

// limitsNode is a testNode with the limits actor.
func limitsNode(t *testing.T) *Node {
	t.Helper()
	n := testNode(t, nil)
	n.limits = newNodeLimits(n)
	if err := n.startLimits(); err != nil {
		t.Fatal(err)
	}
	return n
}

// see makes every node see the same members (the nodes, and extra ones).
func see(members []Member, nodes ...*Node) {
	byID := map[string]string{}
	for _, m := range members {
		byID[m.ID] = m.Address
	}
	for _, n := range nodes {
		n.topology.Store(&Topology{Members: members, byID: byID})
	}
}

func memberOf(n *Node) Member { return Member{ID: n.self, Address: n.system.Address()} }

// keyOwnedBy finds a key that owner owns among members.
func keyOwnedBy(t *testing.T, owner string, members []Member, suffix string) string {
	t.Helper()
	ids := make([]string, len(members))
	for i, m := range members {
		ids[i] = m.ID
	}
	for i := range 1000 {
		if key := fmt.Sprintf("token:t%d%s", i, suffix); keyOwner(key, ids) == owner {
			return key
		}
	}
	t.Fatalf("no key owned by %s", owner)
	return ""
}

func TestLimitsABucketTakenThroughAnotherNodeCountsOnItsOwner(t *testing.T) {
	a, b := limitsNode(t), limitsNode(t)
	members := []Member{memberOf(a), memberOf(b)}
	see(members, a, b)
	key := keyOwnedBy(t, a.self, members, "\x00rate")

	// 3 per minute for the cluster: two through b, one through a.
	for i, n := range []*Node{b, b, a} {
		if ok, _ := n.Limits().Take(key, 3); !ok {
			t.Fatalf("take %d of 3 refused", i+1)
		}
	}
	for _, n := range []*Node{a, b} {
		ok, wait := n.Limits().Take(key, 3)
		if ok || wait <= 0 {
			t.Fatalf("the fourth take of 3 on %s = %v, %v: want refused with a wait", n.self, ok, wait)
		}
	}
	// b asked a, and did not count on its own.
	if ok, _ := a.limits.owned.take(key, 3); ok {
		t.Fatal("the owner's bucket is not empty: b's takes were not counted on a")
	}
	if got := b.limits.fallbacks.Load(); got != 0 {
		t.Fatalf("b decided %d times without the owner", got)
	}
}

func TestLimitsSlotsAreCountedOnTheOwnerAndGivenBack(t *testing.T) {
	a, b := limitsNode(t), limitsNode(t)
	members := []Member{memberOf(a), memberOf(b)}
	see(members, a, b)
	key := keyOwnedBy(t, a.self, members, "\x00calls")

	if !b.Limits().Acquire(key, 2) || !a.Limits().Acquire(key, 2) {
		t.Fatal("two slots of two were refused")
	}
	if b.Limits().Acquire(key, 2) || a.Limits().Acquire(key, 2) {
		t.Fatal("a third slot of two was given")
	}
	if got := a.limits.owned.held(key); got != 2 {
		t.Fatalf("the owner counts %d slots, want 2", got)
	}
	b.Limits().Release(key)
	waitFor(t, func() bool { return a.limits.owned.held(key) == 1 }, "b's release to reach the owner")
	if !b.Limits().Acquire(key, 2) {
		t.Fatal("the slot b gave back was not free")
	}

	// b leaves the membership a sees: the slot it held is a's again.
	a.event(&pcluster.ClusterTopology{Members: []*pcluster.Member{{Id: "troupe@" + a.self, Host: "127.0.0.1", Port: 1}}})
	if got := a.limits.owned.held(key); got != 1 {
		t.Fatalf("after b left the owner counts %d slots, want 1 (a's own)", got)
	}
	if !a.Limits().Acquire(key, 2) {
		t.Fatal("the slot of the member that left was not given back")
	}
}

func TestLimitsDecideOnTheNodeWhenTheOwnerDoesNotAnswer(t *testing.T) {
	b := limitsNode(t)
	b.limits.timeout = 200 * time.Millisecond
	gone := Member{ID: "gone", Address: "127.0.0.1:1"} // nothing listens there
	members := []Member{memberOf(b), gone}
	see(members, b)
	key := keyOwnedBy(t, gone.ID, members, "\x00rate")

	// Fail-open, but bounded: the limit holds on this node.
	for i := range 2 {
		if ok, _ := b.Limits().Take(key, 2); !ok {
			t.Fatalf("take %d of 2 refused without the owner", i+1)
		}
	}
	if ok, _ := b.Limits().Take(key, 2); ok {
		t.Fatal("the third take of 2 was allowed: without its owner a limit must still hold on the node")
	}
	if got := b.limits.fallbacks.Load(); got != 3 {
		t.Fatalf("fallbacks = %d, want 3", got)
	}
	// The owner failed a moment ago: the node does not wait for it again.
	start := time.Now()
	b.Limits().Take(key, 2)
	if d := time.Since(start); d >= b.limits.timeout {
		t.Fatalf("a take waited %v for an owner that had just failed", d)
	}
	slot := keyOwnedBy(t, gone.ID, members, "\x00sessions")
	if !b.Limits().Acquire(slot, 1) || b.Limits().Acquire(slot, 1) {
		t.Fatal("max 1 without the owner: want one slot on this node")
	}
	b.Limits().Release(slot)
	if !b.Limits().Acquire(slot, 1) {
		t.Fatal("the slot taken without the owner was not given back on the node")
	}
}

func waitFor(t *testing.T, cond func() bool, what string) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// An acquire whose answer comes too late is undone on the owner: the node
// decided without it, so the slot the owner took must not stay taken.
func TestLimitsAnAcquireThatTimedOutLeavesNoSlotOnTheOwner(t *testing.T) {
	a, b := limitsNode(t), limitsNode(t)
	members := []Member{memberOf(a), memberOf(b)}
	see(members, a, b)
	key := keyOwnedBy(t, a.self, members, "\x00sessions")

	b.limits.timeout = time.Nanosecond // the answer cannot come in time
	if !b.Limits().Acquire(key, 1) {
		t.Fatal("the node's own counters refused the only slot")
	}
	if got := b.limits.fallbacks.Load(); got != 1 {
		t.Fatalf("fallbacks = %d, want 1", got)
	}
	// The acquire reached a and was undone after it: a's slot is free.
	// (Give both messages time to arrive first: a's own acquire below
	// would otherwise race b's.)
	time.Sleep(200 * time.Millisecond)
	waitFor(t, func() bool { return a.limits.owned.held(key) == 0 }, "the late acquire to be undone on the owner")
	if !a.Limits().Acquire(key, 1) {
		t.Fatal("the owner's only slot stayed taken by an acquire that timed out")
	}
	b.Limits().Release(key) // taken on b's own counters: given back there
	if !b.limits.fallback.Acquire(key, 1) {
		t.Fatal("the fallback slot was not given back")
	}
}
