package cluster

import (
	"fmt"
	"slices"
	"time"
)

// The watchdog's clocks. A join or a drop takes a moment to reach every
// member; a split does not heal.
const (
	// missingGrace is how long this node may be missing from etcd (its
	// lease expired: the others have dropped it) before it leaves.
	missingGrace = 3 * time.Second
	// unseenGrace is how long most of the peers that answer may not list
	// this node among their members (they dropped or blocked it) before it
	// leaves.
	unseenGrace = 4 * time.Second
	// isolatedGrace is how long no other member may answer at all, while
	// etcd answers and lists them, before this node leaves: they have
	// blocked it (a blocked node's messages are refused), or it them.
	isolatedGrace = 10 * time.Second
	// disagreeGrace is the last resort: etcd and this node's membership
	// have disagreed about other members for this long, and no rule above
	// found the odd one out.
	disagreeGrace = 30 * time.Second
	// answerFresh is how recent a peer's answer must be to count.
	answerFresh = 6 * time.Second
)

// peerView is what a peer said when it last answered a Hello.
type peerView struct {
	answered time.Time // zero: never
	seesMe   bool      // its members included this node
}

// facts are what the watchdog sees at one look: this node's id, the
// membership as the ClusterTopology events last showed it, the members
// etcd holds (etcdErr when etcd did not answer), and what each peer said
// last.
type facts struct {
	now      time.Time
	self     string
	topology *Topology
	etcd     []string
	etcdErr  error
	peers    map[string]peerView
}

// verdict is the watchdog's decision: whether the node can route (ready),
// and, when leave is not nil, why it must leave the cluster now.
type verdict struct {
	ready bool
	leave error
}

// watchdog judges the node's standing in the cluster, one look at a time.
// It is pure (time comes in the facts), so its rule is tested without a
// cluster. The library cannot heal a split by itself: after an etcd
// outage longer than the lease, a member whose key expired is dropped and
// blocked by the others, and stays so although it puts its key back.
// Leaving, and coming back as a new process with a new id, heals it at the
// cost of this node's sessions; the rule's care is that only the odd node
// out leaves, never the healthy ones that dropped it: a node leaves when
// etcd has lost it, when most peers do not see it, or when none answers
// it. etcd disagreeing with the membership about OTHER members is that
// other node's to resolve, and only a last resort here. (The library's
// block list is not in its ClusterTopology events, and reading it directly
// races with gossip: a blocked node learns it from its peers' silence.)
type watchdog struct {
	missing, unseen, isolated, disagree clock
	// joined is when each peer was first in the membership: a peer that
	// just joined has not been greeted yet.
	joined map[string]time.Time
}

// clock measures how long a condition has held.
type clock struct{ since time.Time }

// hold reports how long cond has held at now (0 when it does not).
func (c *clock) hold(cond bool, now time.Time) time.Duration {
	if !cond {
		c.since = time.Time{}
		return 0
	}
	if c.since.IsZero() {
		c.since = now
	}
	return now.Sub(c.since)
}

// judge looks once.
func (w *watchdog) judge(f facts) verdict {
	others := w.othersOf(f)
	if f.etcdErr != nil {
		// etcd is away: nothing can be checked, nor may this node promise
		// routes. An outage is counted by none of the clocks.
		w.missing, w.unseen, w.isolated, w.disagree = clock{}, clock{}, clock{}, clock{}
		return verdict{}
	}
	inEtcd := slices.Contains(f.etcd, f.self)
	if d := w.missing.hold(!inEtcd, f.now); d >= missingGrace {
		return verdict{leave: fmt.Errorf("this node has been missing from etcd for %s", d.Round(time.Second))}
	}
	answered, unseen, settled := 0, 0, 0
	for _, id := range others {
		if f.now.Sub(w.joined[id]) >= isolatedGrace {
			settled++
		}
		p := f.peers[id]
		if p.answered.IsZero() || f.now.Sub(p.answered) > answerFresh {
			continue
		}
		answered++
		if !p.seesMe {
			unseen++
		}
	}
	if d := w.unseen.hold(answered > 0 && 2*unseen > answered, f.now); d >= unseenGrace {
		return verdict{leave: fmt.Errorf("%d of the %d members that answer do not see this node (for %s)", unseen, answered, d.Round(time.Second))}
	}
	if d := w.isolated.hold(settled > 0 && answered == 0, f.now); d >= isolatedGrace {
		return verdict{leave: fmt.Errorf("no other member has answered this node for %s", d.Round(time.Second))}
	}
	agree := sameMembers(f.etcd, f.topology.IDs())
	if d := w.disagree.hold(!agree, f.now); d >= disagreeGrace {
		return verdict{leave: fmt.Errorf("the membership %v has disagreed with etcd %v for %s", f.topology.IDs(), sorted(f.etcd), d.Round(time.Second))}
	}
	return verdict{ready: inEtcd && f.topology.Has(f.self)}
}

// othersOf returns the other live members, and notes when each joined.
func (w *watchdog) othersOf(f facts) []string {
	if w.joined == nil {
		w.joined = map[string]time.Time{}
	}
	var others []string
	for _, id := range f.topology.IDs() {
		if id == f.self {
			continue
		}
		others = append(others, id)
		if _, ok := w.joined[id]; !ok {
			w.joined[id] = f.now
		}
	}
	for id := range w.joined {
		if !slices.Contains(others, id) {
			delete(w.joined, id)
		}
	}
	return others
}

func sorted(ids []string) []string {
	s := slices.Clone(ids)
	slices.Sort(s)
	return s
}

// sameMembers compares two id lists as sets.
func sameMembers(a, b []string) bool {
	a, b = slices.Compact(sorted(a)), slices.Compact(sorted(b))
	return slices.Equal(a, b)
}
