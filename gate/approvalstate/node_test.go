package approvalstate_test

import (
	"errors"
	"strings"
	"testing"
	"time"

	"troupe/gate/approvalstate"
)

// clusterSealers are three nodes of one cluster: one shared key, each
// naming itself.
func clusterSealers(t *testing.T, c *clock, key approvalstate.Key, nodes ...string) []*approvalstate.Sealer {
	t.Helper()
	var out []*approvalstate.Sealer
	for _, n := range nodes {
		s, err := approvalstate.New(approvalstate.Options{Key: key, TTL: ttl, Now: c.now, Node: n})
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, s)
	}
	return out
}

// A clustered node names itself in the states it seals, inside the sealed
// part (the node's id is nowhere in the clear), and any node holding the
// key reads which node that is.
func TestStateNamesItsNode(t *testing.T) {
	c := &clock{t: time.Date(2026, 11, 23, 12, 0, 0, 0, time.UTC)}
	key := approvalstate.NewKey()
	nodes := clusterSealers(t, c, key, "NodeAlpha7", "NodeBravo8")
	b := binding(call(`{"command":["touch","marker"]}`), alice)
	st := seal(t, nodes[0], b)
	if strings.Contains(st, "NodeAlpha7") {
		t.Fatal("the state names its node in the clear")
	}
	for i, s := range nodes {
		if got, err := s.IssuedBy(st); err != nil || got != "NodeAlpha7" {
			t.Fatalf("node %d reads the issuer as %q, %v", i, got, err)
		}
	}
	// IssuedBy authenticates: a changed state names nobody.
	bad := []byte(st)
	bad[len(bad)-3] ^= 1
	if got, err := nodes[1].IssuedBy(string(bad)); !errors.Is(err, approvalstate.ErrTampered) && !errors.Is(err, approvalstate.ErrMalformed) {
		t.Fatalf("a changed state: %q, %v", got, err)
	}
	// IssuedBy used nothing up.
	if _, err := nodes[0].Open(st, b); err != nil {
		t.Fatal(err)
	}
}

// The replay defence across a cluster: a node refuses a state another node
// issued (it cannot know whether that node redeemed it), before and after
// the issuer has, and a state of a process outside the cluster (no node),
// while the issuer opens its own once.
func TestOtherNodeRefusesState(t *testing.T) {
	c := &clock{t: time.Date(2026, 11, 23, 12, 0, 0, 0, time.UTC)}
	key := approvalstate.NewKey()
	nodes := clusterSealers(t, c, key, "NodeAlpha7", "NodeBravo8", "NodeCharlie9")
	b := binding(call(`{"command":["touch","marker"]}`), alice)
	st := seal(t, nodes[0], b)
	for _, s := range nodes[1:] {
		if _, err := s.Check(st, b); !errors.Is(err, approvalstate.ErrOtherNode) {
			t.Fatalf("%s checked another node's state: %v", s.Node(), err)
		}
		if _, err := s.Open(st, b); !errors.Is(err, approvalstate.ErrOtherNode) {
			t.Fatalf("%s opened another node's state: %v", s.Node(), err)
		}
	}
	if _, err := nodes[0].Open(st, b); err != nil {
		t.Fatalf("the issuer: %v", err)
	}
	if _, err := nodes[0].Open(st, b); !errors.Is(err, approvalstate.ErrReplayed) {
		t.Fatalf("the issuer, again: %v", err)
	}
	if _, err := nodes[2].Open(st, b); !errors.Is(err, approvalstate.ErrOtherNode) {
		t.Fatalf("a third node after the issuer redeemed it: %v", err)
	}
	// A process outside the cluster with the same key: its states name no
	// node, and no cluster node opens them; nor does it open theirs.
	single := newSealer(t, c, key)
	plain := seal(t, single, b)
	if _, err := nodes[1].Open(plain, b); !errors.Is(err, approvalstate.ErrOtherNode) {
		t.Fatalf("a cluster node opened a state of no node: %v", err)
	}
	if _, err := single.Open(seal(t, nodes[1], b), b); !errors.Is(err, approvalstate.ErrOtherNode) {
		t.Fatalf("a process outside the cluster opened a node's state: %v", err)
	}
	// The node refusal says nothing of a state issued to another caller.
	if _, err := nodes[1].Open(st, binding(call(`{"command":["touch","marker"]}`), bob)); !errors.Is(err, approvalstate.ErrOtherCaller) {
		t.Fatalf("another caller's state on another node: %v", err)
	}
}

// One process (no cluster) is as before: its states name no node and open
// in any process that shares the key, and SetNode binds from then on.
func TestOneProcessNamesNoNode(t *testing.T) {
	c := &clock{t: time.Date(2026, 11, 23, 12, 0, 0, 0, time.UTC)}
	key := approvalstate.NewKey()
	a, b2 := newSealer(t, c, key), newSealer(t, c, key)
	b := binding(call(`{"command":["touch","marker"]}`), alice)
	st := seal(t, a, b)
	if n, err := b2.IssuedBy(st); err != nil || n != "" {
		t.Fatalf("a one-process state names %q, %v", n, err)
	}
	if _, err := b2.Open(st, b); err != nil {
		t.Fatalf("another process with the key: %v", err)
	}
	a.SetNode("NodeDelta1")
	st = seal(t, a, b)
	if n, _ := b2.IssuedBy(st); n != "NodeDelta1" {
		t.Fatalf("after SetNode the state names %q", n)
	}
	if _, err := a.Open(st, b); err != nil {
		t.Fatalf("the node's own state: %v", err)
	}
}
