package cluster

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"net"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/asynkron/protoactor-go/actor"
	pcluster "github.com/asynkron/protoactor-go/cluster"
	"github.com/asynkron/protoactor-go/cluster/identitylookup/disthash"
	"github.com/asynkron/protoactor-go/eventstream"
	"github.com/asynkron/protoactor-go/remote"
	clientv3 "go.etcd.io/etcd/client/v3"

	"troupe/cluster/wire"
	"troupe/config"
	"troupe/observe"
)

// Options configure a Node. Name, Listen and EtcdEndpoints are required.
type Options struct {
	// Name is the cluster's name: nodes of one name form one cluster.
	Name string
	// Listen is the host:port of node-to-node traffic.
	Listen string
	// Advertise is the host:port other nodes dial ("" = Listen).
	Advertise string
	// EtcdEndpoints are the etcd servers (host:port) holding the membership.
	EtcdEndpoints []string
	// TLS is mutual TLS between nodes.
	TLS TLSFiles
	// Fingerprint is this node's config fingerprint
	// (config.ClusterFingerprint): a node whose fingerprint differs from
	// the cluster's does not join.
	Fingerprint map[string]string
	// Logger receives troupe's cluster logs; RuntimeLogger the library's
	// (default: Logger). nil discards.
	Logger, RuntimeLogger *slog.Logger
	// Lost is called once, on the watchdog's goroutine, when the node must
	// leave the cluster (it is the odd one out of a split: watchdog.go):
	// the process should end and be started again as a new node.
	Lost func(error)
	// JoinTimeout bounds the wait for etcd at start (default 10 s).
	JoinTimeout time.Duration
}

// Node is this process as a member of a troupe cluster.
type Node struct {
	opts    Options
	log     *slog.Logger
	system  *actor.ActorSystem
	cluster *pcluster.Cluster
	self    string
	sub     *eventstream.Subscription
	tunnel  *actor.PID
	etcd    *clientv3.Client

	topology atomic.Pointer[Topology]
	ready    atomic.Bool
	handler  atomic.Pointer[http.Handler]
	forwards forwards
	hops     hopStats
	peers    peerViews
	limits   *nodeLimits

	stop      chan struct{}
	done      chan struct{}
	closeOnce sync.Once
}

// ConfigMismatchError is Start's error when this node's config differs
// from a member's in sections that must agree.
type ConfigMismatchError struct {
	Member   string
	Sections []string
}

// ConfigProblem reports that the fault is the configuration's (troupe
// exits 2 for it, as for any configuration it refuses).
func (e *ConfigMismatchError) ConfigProblem() bool { return true }

func (e *ConfigMismatchError) Error() string {
	return fmt.Sprintf("this node's config differs from member %s's in [%s]: every node of a cluster must run "+
		"the same tools, downstream servers, limits per identity, approvals and authentication; not joining",
		e.Member, strings.Join(e.Sections, "], ["))
}

// Start joins the cluster: it starts the remote (mutual TLS), registers in
// etcd, checks that the members' configs agree with this one, and starts
// the watchdog. The node routes once Serve has been called and the
// watchdog has seen it in both etcd and the membership (Ready). A node
// that cannot join returns an error and leaves nothing listening.
func Start(opts Options) (*Node, error) {
	if opts.Name == "" || opts.Listen == "" || len(opts.EtcdEndpoints) == 0 {
		return nil, errors.New("cluster: name, listen and etcd_endpoints are required")
	}
	if opts.JoinTimeout <= 0 {
		opts.JoinTimeout = 10 * time.Second
	}
	log := opts.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	rlog := opts.RuntimeLogger
	if rlog == nil {
		rlog = log
	}
	serverOpts, dialOpts, err := opts.TLS.grpcOptions()
	if err != nil {
		return nil, err
	}
	host, port, err := splitHostPort(opts.Listen)
	if err != nil {
		return nil, fmt.Errorf("cluster.listen: %w", err)
	}
	// The library panics on a taken port: find out first.
	ln, err := net.Listen("tcp", opts.Listen)
	if err != nil {
		return nil, fmt.Errorf("cluster.listen: %w", err)
	}
	_ = ln.Close()

	n := &Node{opts: opts, log: log, stop: make(chan struct{}), done: make(chan struct{})}
	n.limits = newNodeLimits(n)
	n.system = actor.NewActorSystem(
		actor.WithLoggerFactory(func(*actor.ActorSystem) *slog.Logger { return rlog.With("lib", "protoactor") }),
		actor.WithDeadLetterRequestLogging(false))
	ropts := []remote.ConfigOption{
		remote.WithEndpointWriterQueueSize(10000), remote.WithEndpointManagerQueueSize(10000),
		remote.WithDialOptions(append(dialOpts, closeAbandonedConns())...),
	}
	if serverOpts != nil {
		ropts = append(ropts, remote.WithServerOptions(serverOpts...))
	}
	if opts.Advertise != "" {
		ropts = append(ropts, remote.WithAdvertisedHost(opts.Advertise))
	}
	provider := &etcdProvider{endpoints: opts.EtcdEndpoints, timeout: opts.JoinTimeout, log: log}
	cfg := pcluster.Configure(opts.Name, provider, disthash.New(), remote.Configure(host, port, ropts...))
	n.cluster = pcluster.New(n.system, cfg)
	n.sub = n.system.EventStream.Subscribe(n.event)
	tunnel := &tunnel{handler: &n.handler, self: n.system.ID, print: opts.Fingerprint, log: log,
		members: func() []string { return n.topology.Load().IDs() }}
	n.tunnel, err = n.system.Root.SpawnNamed(actor.PropsFromProducer(func() actor.Actor { return tunnel }), tunnelName)
	if err != nil {
		return nil, fmt.Errorf("cluster: %w", err)
	}
	if err = n.startLimits(); err != nil {
		return nil, fmt.Errorf("cluster: %w", err)
	}
	if err := n.startMember(); err != nil {
		n.system.EventStream.Unsubscribe(n.sub)
		n.system.Shutdown()
		return nil, err
	}
	n.self = n.system.ID
	if opts.TLS.Insecure {
		log.Warn("cluster: node-to-node traffic is NOT encrypted nor authenticated (cluster.tls_insecure): for tests on loopback only")
	}
	n.etcd, err = clientv3.New(etcdConfig(opts.EtcdEndpoints, opts.JoinTimeout))
	if err != nil {
		n.leave()
		return nil, fmt.Errorf("cluster: etcd client: %w", err)
	}
	if err := n.checkConfigs(); err != nil {
		n.leave()
		return nil, err
	}
	greeted := make(chan struct{})
	go n.greet(greeted)
	go func() {
		n.watch()
		<-greeted
		close(n.done)
	}()
	log.Info("joined the cluster", "cluster", opts.Name, "member", n.self, "address", n.system.Address(),
		"members", len(n.topology.Load().Members))
	return n, nil
}

// startMember runs the library's StartMember, which panics where it
// should fail: the panic becomes the error.
func (n *Node) startMember() (err error) {
	defer func() {
		if r := recover(); r != nil {
			err = fmt.Errorf("cluster: cannot join: %v", r)
		}
	}()
	n.cluster.StartMember()
	return nil
}

// Serve makes the node serve forwarded requests with h (the node's own
// MCP handler, which checks them again as it checks its own clients').
func (n *Node) Serve(h http.Handler) { n.handler.Store(&h) }

// Self is this node's member id, which its session ids carry.
func (n *Node) Self() string { return n.self }

// Ready reports whether the node can route: it serves, it is in etcd and
// in the membership, and the watchdog has seen them agree.
func (n *Node) Ready() bool { return n.ready.Load() && n.handler.Load() != nil }

// NewSessionID makes a session id this node owns.
func (n *Node) NewSessionID() string { return NewSessionID(n.self) }

// Owner returns the member a session id names and whether that is this
// node. An id naming no member is this node's to answer (it will be unknown).
func (n *Node) Owner(sessionID string) (member string, local bool) {
	m, ok := OwnerOf(sessionID)
	if !ok || m == n.self {
		return n.self, true
	}
	return m, false
}

// event handles the actor system's events (on the publisher's goroutine).
func (n *Node) event(evt any) {
	switch e := evt.(type) {
	case *pcluster.ClusterTopology:
		t := topologyOf(e)
		old := n.topology.Swap(t)
		n.forwards.lose(func(p *pending) bool { return !t.Has(p.member) })
		// Requests forwarded here by a front whose node left are stopped:
		// nobody reads their answers (the remote may not notice for long
		// when this node has not written to it yet).
		// The slots a member that left held of the keys this node owns
		// are given back: its calls and sessions ended with it.
		if old != nil {
			for _, m := range old.Members {
				if t.Has(m.ID) {
					continue
				}
				if n.tunnel != nil {
					n.system.Root.Send(n.tunnel, &frontLost{address: m.Address})
				}
				if n.limits != nil {
					n.limits.holderLeft(m.ID)
				}
			}
		}
	case *remote.EndpointTerminatedEvent:
		n.forwards.lose(func(p *pending) bool { return p.address == e.Address })
		if n.tunnel != nil {
			n.system.Root.Send(n.tunnel, &frontLost{address: e.Address})
		}
	}
}

// checkConfigs asks every other member for its fingerprint and refuses to
// stay in a cluster whose config differs from this node's.
func (n *Node) checkConfigs() error {
	for _, m := range n.topology.Load().Members {
		if m.ID == n.self {
			continue
		}
		fp, err := n.hello(m)
		if err != nil {
			n.log.Warn("cluster: a member did not answer", "member", m.ID, "address", m.Address, "err", err)
			continue
		}
		if diff := config.DiffFingerprints(n.opts.Fingerprint, fp.GetSections()); len(diff) > 0 {
			return &ConfigMismatchError{Member: m.ID, Sections: diff}
		}
	}
	return nil
}

// hello asks a member for its fingerprint, and records the round trip.
func (n *Node) hello(m Member) (*wire.Fingerprint, error) {
	start := time.Now()
	res, err := n.system.Root.RequestFuture(actor.NewPID(m.Address, tunnelName), &wire.Hello{From: n.self}, 2*time.Second).Result()
	if err != nil {
		return nil, err
	}
	fp, ok := res.(*wire.Fingerprint)
	if !ok {
		return nil, fmt.Errorf("unexpected answer %T", res)
	}
	n.hops.observe(m.ID, time.Since(start))
	return fp, nil
}

// watch is the watchdog's loop: a look every second, until the node
// closes or the watchdog says it must leave.
func (n *Node) watch() {
	var w watchdog
	n.every(time.Second, func() bool {
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		ids, err := etcdMembers(ctx, n.etcd, n.opts.Name)
		cancel()
		v := w.judge(facts{now: time.Now(), self: n.self, topology: n.topology.Load(), etcd: ids, etcdErr: err,
			peers: n.peers.snapshot()})
		if v.ready != n.ready.Swap(v.ready) {
			n.log.Info("cluster: readiness changed", "ready", v.ready, "etcd_err", err)
		}
		if v.leave != nil {
			n.log.Error("cluster: leaving, to be started again as a new node", "reason", v.leave)
			if n.opts.Lost != nil {
				n.opts.Lost(v.leave)
			}
			return false
		}
		return true
	})
}

// every runs f every d until the node closes or f returns false.
func (n *Node) every(d time.Duration, f func() bool) {
	tick := time.NewTicker(d)
	defer tick.Stop()
	for {
		select {
		case <-n.stop:
			return
		case <-tick.C:
		}
		if !f() {
			return
		}
	}
}

// greetEvery is how often the node greets every member: the round trip
// /status shows, the members each sees (the watchdog's peers' view), and a
// check that the configs still agree after reloads.
const greetEvery = 2 * time.Second

// greet greets every member every greetEvery until the node closes.
func (n *Node) greet(done chan<- struct{}) {
	defer close(done)
	n.every(greetEvery, func() bool {
		for _, m := range n.topology.Load().Members {
			if m.ID == n.self {
				continue
			}
			fp, err := n.hello(m)
			if err != nil {
				continue
			}
			n.peers.answered(m.ID, time.Now(), slices.Contains(fp.GetMembers(), n.self))
			if diff := config.DiffFingerprints(n.opts.Fingerprint, fp.GetSections()); len(diff) > 0 {
				n.log.Warn("cluster: a member's config differs from this node's", "member", m.ID, "sections", diff)
			}
		}
		return true
	})
}

// peerViews are the peers' last answers, for the watchdog.
type peerViews struct {
	mu    sync.Mutex
	views map[string]peerView
}

func (p *peerViews) answered(member string, at time.Time, seesMe bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.views == nil {
		p.views = map[string]peerView{}
	}
	p.views[member] = peerView{answered: at, seesMe: seesMe}
}

func (p *peerViews) snapshot() map[string]peerView {
	p.mu.Lock()
	defer p.mu.Unlock()
	return maps.Clone(p.views)
}

// Close leaves the cluster: the watchdog stops, the member's key is
// deleted (the others drop it at once), and the remote stops. Requests
// should have been answered before (the HTTP front drains first). The
// library leaves goroutines behind: a node that left is never joined
// again in the same process.
func (n *Node) Close() {
	n.closeOnce.Do(func() {
		close(n.stop)
		<-n.done
		n.leave()
	})
}

func (n *Node) leave() {
	n.ready.Store(false)
	n.system.EventStream.Unsubscribe(n.sub)
	func() {
		defer func() { _ = recover() }() // the library's shutdown must not turn a clean exit into a crash
		n.cluster.Shutdown(true)
	}()
	if n.etcd != nil {
		_ = n.etcd.Close()
	}
}

// MemberStatus is one member as /status shows it.
type MemberStatus struct {
	ID, Address string
	Self        bool
	// RTT is the last node-to-node round trip (0: not measured yet).
	RTT time.Duration
}

// Status is the node's view of the cluster.
type Status struct {
	Self    string
	Ready   bool
	Members []MemberStatus
}

// Status returns the node's view of the cluster, for /status.
func (n *Node) Status() Status {
	t := n.topology.Load()
	s := Status{Self: n.self, Ready: n.Ready()}
	if t == nil {
		return s
	}
	for _, m := range t.Members {
		rtt, _ := n.hops.get(m.ID)
		s.Members = append(s.Members, MemberStatus{ID: m.ID, Address: m.Address, Self: m.ID == n.self, RTT: rtt})
	}
	return s
}

func splitHostPort(addr string) (string, int, error) {
	host, p, err := net.SplitHostPort(addr)
	if err != nil {
		return "", 0, err
	}
	port, err := strconv.Atoi(p)
	if err != nil || port <= 0 || port > 65535 {
		return "", 0, fmt.Errorf("%q: the port must be a number from 1 to 65535", addr)
	}
	return host, port, nil
}

// Info is Status as the operators' views show it (package observe).
func (n *Node) Info() observe.ClusterInfo {
	s := n.Status()
	info := observe.ClusterInfo{Node: s.Self, Ready: s.Ready, Members: make([]observe.MemberInfo, 0, len(s.Members)),
		LimitFallbacks: n.limits.fallbacks.Load()}
	for _, m := range s.Members {
		info.Members = append(info.Members, observe.MemberInfo{ID: m.ID, Address: m.Address, Self: m.Self, RTTSeconds: m.RTT.Seconds()})
	}
	return info
}
