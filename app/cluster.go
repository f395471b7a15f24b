package app

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"

	"troupe/config"
	"troupe/limits"
	"troupe/mcphttp"
	"troupe/observe"
	"troupe/pins"
)

// ClusterNode is this process as a node of a cluster (package cluster's
// Node): the HTTP front's view of it, and what Run does with it.
type ClusterNode interface {
	mcphttp.Cluster
	// Serve makes the node serve the requests other nodes forward to it
	// with h.
	Serve(h http.Handler)
	// Close leaves the cluster.
	Close()
	// Self is this node's member id, which its session ids and approval
	// states carry.
	Self() string
	// Info is the node's view of the cluster, for /status and /metrics.
	Info() observe.ClusterInfo
	// Limits is the cluster's store of limit counters (one owner member
	// per key), which the host's limits count on once the node has joined.
	Limits() limits.Store
	// PinStore is the cluster's store of the downstream servers' pins
	// (package cluster's, in etcd): every node reads and records the same
	// pins, so an operator's accept on one node holds on all; nil keeps
	// the pins in the node's pins file.
	PinStore() pins.Store
}

// JoinCluster joins the cluster cfg's [cluster] table configures; lost is
// told, once, when the node must leave. Package cluster's Join is one,
// adapted by the troupe-cluster build (cmd/troupe); the default build has
// none, so that a single process never links the cluster's libraries (they
// would cost every troupe start-up time and memory).
type JoinCluster func(cfg *config.Config, log, runtimeLog *slog.Logger, lost func(error)) (ClusterNode, error)

// joinCluster makes this process a node of the cluster [cluster]
// configures, or returns nil when it configures none (one process, no
// remote started). lost is told, once, when the node must leave (the
// watchdog's verdict): Run then drains and returns an error, and the
// process manager starts troupe again as a new node.
func (a *App) joinCluster(cfg *config.Config, lost func(error)) (ClusterNode, error) {
	if cfg.Cluster.Provider == "" {
		return nil, nil
	}
	if cfg.HTTP.Listen == "" {
		return nil, &SetupError{Config: true, Problems: []error{
			errors.New("cluster.provider is set but http.listen is not: a cluster node serves MCP over HTTP")}}
	}
	if a.opts.JoinCluster == nil {
		return nil, &SetupError{Config: true, Problems: []error{
			errors.New("cluster.provider is set but this troupe was built without cluster support: run troupe-cluster " +
				"(go build -tags troupe_cluster -o troupe-cluster ./cmd/troupe)")}}
	}
	node, err := a.opts.JoinCluster(cfg, a.log, a.runtimeLog(), lost)
	var problem interface{ ConfigProblem() bool }
	if errors.As(err, &problem) && problem.ConfigProblem() {
		return nil, &SetupError{Config: true, Problems: []error{err}}
	}
	if err != nil {
		return nil, fmt.Errorf("cannot join the cluster: %w", err)
	}
	return node, nil
}

// pinStoreFor is where a run keeps its pins: the cluster's store when this
// process is a node (accepted versions are the same on every node, and a
// change the nodes see at once is recorded once), else the pins file.
func pinStoreFor(cfg *config.Config, node ClusterNode) (pins.Store, error) {
	if node != nil {
		if s := node.PinStore(); s != nil {
			return s, nil
		}
	}
	return pinStore(cfg)
}

// ErrClusterPins is why a command that is not a running node (troupe
// tools, --accept) cannot read or accept a cluster's pins: they are in
// etcd, which only the nodes (troupe-cluster serving) reach.
var ErrClusterPins = errors.New("the pins of a cluster's downstream servers are kept in etcd, which only a " +
	"running node reaches: accept a held tool on the status page of any node (/status, as an operator)")

// clusterPinsElsewhere is the pins store of a clustered config outside a
// node (troupe tools, config check): it reads and records nothing, so
// that no command pins into a local file the nodes never read, nor shows
// that file's pins as the cluster's. A review through it fails closed.
type clusterPinsElsewhere struct{}

// Load implements pins.Store: the cluster's pins are out of reach.
func (clusterPinsElsewhere) Load(context.Context) (*pins.Doc, error) { return nil, ErrClusterPins }

// Update implements pins.Store: the cluster's pins are out of reach.
func (clusterPinsElsewhere) Update(context.Context, func(*pins.Doc) (bool, error)) (*pins.Doc, error) {
	return nil, ErrClusterPins
}

// Watch implements pins.Store: there is nothing to watch.
func (clusterPinsElsewhere) Watch(ctx context.Context, _ func()) error {
	<-ctx.Done()
	return nil
}
