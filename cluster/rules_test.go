package cluster

import (
	"errors"
	"strings"
	"testing"
	"time"

	pcluster "github.com/asynkron/protoactor-go/cluster"
)

func TestSessionIDsNameTheirOwner(t *testing.T) {
	id := NewSessionID("Abc123")
	if m, ok := OwnerOf(id); !ok || m != "Abc123" {
		t.Fatalf("OwnerOf(%q) = %q, %v", id, m, ok)
	}
	if a, b := NewSessionID("m"), NewSessionID("m"); a == b {
		t.Fatal("two ids are equal")
	}
	plain := NewSessionID("")
	if len(plain) != 32 || strings.Contains(plain, ".") {
		t.Fatalf("a single process's id %q", plain)
	}
	for _, bad := range []string{plain, "", ".", "0123456789abcdef0123456789abcdef.", "short.member",
		"0123456789abcdef0123456789abcdef.mem/ber", "0123456789abcdef0123456789abcdef.a.b",
		"0123456789abcdef0123456789abcdef." + strings.Repeat("a", 65)} {
		if m, ok := OwnerOf(bad); ok {
			t.Errorf("OwnerOf(%q) = %q, want none", bad, m)
		}
	}
}

func TestTopologyFromAnEvent(t *testing.T) {
	topo := topologyOf(&pcluster.ClusterTopology{
		Members: []*pcluster.Member{{Id: "troupe@b", Host: "127.0.0.1", Port: 7002}, {Id: "troupe@a", Host: "::1", Port: 7001}},
	})
	if got := topo.IDs(); len(got) != 2 || got[0] != "a" || got[1] != "b" {
		t.Fatalf("ids %v", got)
	}
	if a, ok := topo.Address("a"); !ok || a != "[::1]:7001" {
		t.Fatalf("address of a: %q %v", a, ok)
	}
	if topo.Has("z") {
		t.Fatal("a member that is not in the event is not live")
	}
	var none *Topology
	if none.Has("a") || none.IDs() != nil {
		t.Fatal("a nil topology knows nobody")
	}
}

func topo(ids ...string) *Topology {
	ev := &pcluster.ClusterTopology{}
	for _, id := range ids {
		ev.Members = append(ev.Members, &pcluster.Member{Id: "troupe@" + id, Host: "127.0.0.1", Port: 1})
	}
	return topologyOf(ev)
}

func TestWatchdogRule(t *testing.T) {
	t0 := time.Unix(1000, 0)
	at := func(s float64) time.Time { return t0.Add(time.Duration(s * float64(time.Second))) }
	// peers says, for each id, that it answered at the look's time and
	// whether it sees "a".
	peers := func(now time.Time, sees map[string]bool) map[string]peerView {
		v := map[string]peerView{}
		for id, s := range sees {
			v[id] = peerView{answered: now, seesMe: s}
		}
		return v
	}
	down := errors.New("down")
	ab, abc := []string{"a", "b"}, []string{"a", "b", "c"}
	for _, tc := range []struct {
		name  string
		looks []facts
		ready bool
		leave string
	}{
		{name: "agreeing", looks: []facts{{now: at(0), self: "a", topology: topo("a", "b"), etcd: []string{"b", "a"},
			peers: peers(at(0), map[string]bool{"b": true})}}, ready: true},
		{name: "not joined yet", looks: []facts{{now: at(0), self: "a", topology: topo("b"), etcd: ab}}},
		{name: "etcd away: not ready, never leaves", looks: []facts{
			{now: at(0), self: "a", topology: topo("a", "b"), etcdErr: down},
			{now: at(60), self: "a", topology: topo("a", "b"), etcdErr: down}}},
		{name: "missing from etcd for a moment", looks: []facts{
			{now: at(0), self: "a", topology: topo("a", "b"), etcd: []string{"b"}},
			{now: at(2.9), self: "a", topology: topo("a", "b"), etcd: []string{"b"}}}},
		{name: "missing from etcd for 3 s", looks: []facts{
			{now: at(0), self: "a", topology: topo("a", "b"), etcd: []string{"b"}},
			{now: at(3), self: "a", topology: topo("a", "b"), etcd: []string{"b"}}}, leave: "missing from etcd"},
		{name: "most peers do not see this node", looks: []facts{
			{now: at(0), self: "a", topology: topo("a", "b", "c"), etcd: abc, peers: peers(at(0), map[string]bool{"b": false, "c": false})},
			{now: at(4), self: "a", topology: topo("a", "b", "c"), etcd: abc, peers: peers(at(4), map[string]bool{"b": false, "c": false})}},
			leave: "do not see this node"},
		{name: "one peer of three that does not see this node is its own problem", looks: []facts{
			{now: at(0), self: "a", topology: topo("a", "b", "c", "d"), etcd: []string{"a", "b", "c", "d"},
				peers: peers(at(0), map[string]bool{"b": false, "c": true, "d": true})},
			{now: at(20), self: "a", topology: topo("a", "b", "c", "d"), etcd: []string{"a", "b", "c", "d"},
				peers: peers(at(20), map[string]bool{"b": false, "c": true, "d": true})}}, ready: true},
		{name: "the healthy side of a split stays", looks: []facts{
			// etcd lists c again (its lease came back), this node dropped c,
			// and b agrees with this node: c is the odd one out.
			{now: at(0), self: "a", topology: topo("a", "b"), etcd: abc, peers: peers(at(0), map[string]bool{"b": true})},
			{now: at(20), self: "a", topology: topo("a", "b"), etcd: abc, peers: peers(at(20), map[string]bool{"b": true})}},
			ready: true},
		{name: "the odd one out, whom nobody answers, leaves", looks: []facts{
			{now: at(0), self: "c", topology: topo("a", "b", "c"), etcd: abc},
			{now: at(10), self: "c", topology: topo("a", "b", "c"), etcd: abc},
			{now: at(20), self: "c", topology: topo("a", "b", "c"), etcd: abc}}, leave: "no other member has answered"},
		{name: "a member that just joined is not counted as silent", looks: []facts{
			{now: at(0), self: "a", topology: topo("a"), etcd: ab},
			{now: at(5), self: "a", topology: topo("a", "b"), etcd: ab},
			{now: at(12), self: "a", topology: topo("a", "b"), etcd: ab}}, ready: true},
		{name: "a disagreement with etcd that nothing resolves, as a last resort", looks: []facts{
			{now: at(0), self: "a", topology: topo("a"), etcd: ab},
			{now: at(30), self: "a", topology: topo("a"), etcd: ab}}, leave: "disagreed with etcd"},
		{name: "an outage does not count", looks: []facts{
			{now: at(0), self: "a", topology: topo("a", "b"), etcd: []string{"b"}},
			{now: at(2), self: "a", topology: topo("a", "b"), etcdErr: down},
			{now: at(4), self: "a", topology: topo("a", "b"), etcd: []string{"b"}}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var w watchdog
			var v verdict
			for _, f := range tc.looks {
				v = w.judge(f)
			}
			if v.ready != tc.ready {
				t.Errorf("ready = %v, want %v", v.ready, tc.ready)
			}
			switch {
			case tc.leave == "" && v.leave != nil:
				t.Errorf("leaves: %v", v.leave)
			case tc.leave != "" && (v.leave == nil || !strings.Contains(v.leave.Error(), tc.leave)):
				t.Errorf("leave = %v, want one saying %q", v.leave, tc.leave)
			}
		})
	}
}
