package cluster

import (
	"fmt"
	"slices"
	"time"
)

// disagreeGrace is how long etcd and the membership may disagree about
// this node before it leaves: a join or a drop takes a moment to reach
// every member, a split does not heal.
const disagreeGrace = 3 * time.Second

// facts are what the watchdog sees at one look: this node's id, the
// membership as the ClusterTopology events last showed it, and the members
// etcd holds (etcdErr when etcd did not answer).
type facts struct {
	now      time.Time
	self     string
	topology *Topology
	etcd     []string
	etcdErr  error
}

// verdict is the watchdog's decision: whether the node can route (ready),
// and, when leave is not nil, why it must leave the cluster now.
type verdict struct {
	ready bool
	leave error
}

// watchdog judges the node's standing in the cluster, one look at a time.
// It is pure (time comes in the facts), so its rule is tested without a
// cluster. The library cannot heal a split by itself: a member blocked by
// id stays blocked, and one whose lease expired during an etcd outage may
// never be seen again by the others. Leaving, and coming back as a new
// process with a new id, heals both at the cost of this node's sessions.
type watchdog struct {
	since  time.Time // when the current disagreement began (zero: none)
	reason string
}

// judge looks once.
func (w *watchdog) judge(f facts) verdict {
	if f.topology.IsBlocked(f.self) {
		return verdict{leave: fmt.Errorf("the cluster has blocked this node (id %s)", f.self)}
	}
	if f.etcdErr != nil {
		// etcd is away: nothing can be compared, nor may this node promise
		// routes it cannot check. An outage is not counted as disagreement.
		w.since = time.Time{}
		return verdict{}
	}
	inEtcd := slices.Contains(f.etcd, f.self)
	inTopology := f.topology.Has(f.self)
	reason := ""
	switch {
	case !inEtcd:
		reason = "this node is missing from etcd"
	case !sameMembers(f.etcd, f.topology.IDs()):
		reason = fmt.Sprintf("the membership %v disagrees with etcd %v", f.topology.IDs(), sorted(f.etcd))
	}
	if reason == "" {
		w.since = time.Time{}
		return verdict{ready: inTopology}
	}
	if w.since.IsZero() {
		w.since = f.now
	}
	w.reason = reason
	if f.now.Sub(w.since) >= disagreeGrace {
		return verdict{leave: fmt.Errorf("%s for %s", reason, f.now.Sub(w.since).Round(time.Second))}
	}
	return verdict{ready: inEtcd && inTopology}
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
