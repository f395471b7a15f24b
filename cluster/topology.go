package cluster

import (
	"net"
	"slices"
	"strconv"
	"strings"

	pcluster "github.com/asynkron/protoactor-go/cluster"
)

// Member is one node of the cluster as the membership shows it.
type Member struct {
	// ID is the member id session ids carry (the node's actor system id).
	ID string
	// Address is the host:port of its remote (node-to-node traffic).
	Address string
}

// Topology is a snapshot of the membership: immutable once made, swapped
// whole on each ClusterTopology event, so readers need no lock.
type Topology struct {
	// Members are the live members, sorted by id, this node among them once
	// it has joined.
	Members []Member
	byID    map[string]string
}

// memberID is the id a session carries for a membership id: the etcd
// provider names members "<cluster>@<actor system id>".
func memberID(id string) string {
	if _, after, found := strings.Cut(id, "@"); found {
		return after
	}
	return id
}

// topologyOf makes the snapshot of a ClusterTopology event.
func topologyOf(ev *pcluster.ClusterTopology) *Topology {
	t := &Topology{byID: map[string]string{}}
	for _, m := range ev.GetMembers() {
		id := memberID(m.GetId())
		addr := net.JoinHostPort(m.GetHost(), strconv.Itoa(int(m.GetPort())))
		t.Members = append(t.Members, Member{ID: id, Address: addr})
		t.byID[id] = addr
	}
	slices.SortFunc(t.Members, func(a, b Member) int { return strings.Compare(a.ID, b.ID) })
	return t
}

// Address returns the remote address of a member, false when it is not a
// live member (it left, was dropped, or never was).
func (t *Topology) Address(member string) (string, bool) {
	if t == nil {
		return "", false
	}
	a, ok := t.byID[member]
	return a, ok
}

// Has reports whether member is live.
func (t *Topology) Has(member string) bool {
	_, ok := t.Address(member)
	return ok
}

// IDs are the live members' ids, sorted.
func (t *Topology) IDs() []string {
	if t == nil {
		return nil
	}
	ids := make([]string, len(t.Members))
	for i, m := range t.Members {
		ids[i] = m.ID
	}
	return ids
}
