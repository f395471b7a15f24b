package observe

import (
	"github.com/prometheus/client_golang/prometheus"
)

// Cluster is what the Hub shows of the cluster this process is a node of
// (SetCluster); one process has none, and its page and metrics say
// nothing of clusters.
type Cluster struct {
	// Node is this node's member id: every troupe_* series carries it as
	// its node label, so one Prometheus sees the nodes apart.
	Node string
	// Status reads the node's view of the cluster now, at each scrape and
	// each snapshot: it must not block.
	Status func() ClusterInfo
}

// ClusterInfo is the cluster as one node sees it, in a Snapshot.
type ClusterInfo struct {
	// Node is this node's member id.
	Node string `json:"node"`
	// Ready says whether the node routes (its /readyz answers 200).
	Ready bool `json:"ready"`
	// Members are the live members, this node among them once joined.
	Members []MemberInfo `json:"members"`
	// LimitFallbacks counts the limit decisions this node took with its
	// own counters because the key's owner did not answer (package
	// cluster's Limits): a limit held per node, not for the cluster.
	LimitFallbacks uint64 `json:"limit_fallbacks"`
}

// MemberInfo is one member of the cluster, in a Snapshot.
type MemberInfo struct {
	// ID is its member id (session ids made there carry it).
	ID string `json:"id"`
	// Address is the host:port of its node-to-node traffic.
	Address string `json:"address"`
	// Self is true for this node.
	Self bool `json:"self,omitempty"`
	// RTTSeconds is the last node-to-node round trip to it (0: not
	// measured yet, and always for this node).
	RTTSeconds float64 `json:"rtt_seconds"`
}

// clusterView is SetCluster's Cluster as the Hub keeps it.
type clusterView struct {
	Cluster
}

// info is the cluster now, with slices that encode as [] when empty.
func (c *clusterView) info() *ClusterInfo {
	i := c.Status()
	if i.Node == "" {
		i.Node = c.Node
	}
	if i.Members == nil {
		i.Members = []MemberInfo{}
	}
	return &i
}

// SetCluster tells the Hub that this process is the cluster node c: from
// now on every troupe_* series carries the label node=c.Node (the same
// counters, so nothing counted before is lost), /metrics adds
// troupe_cluster_members and troupe_cluster_rtt_seconds{member}, and the
// Snapshot gains the cluster and each session's owner. Call it once, before
// the node serves.
func (h *Hub) SetCluster(c Cluster) {
	if h == nil || c.Status == nil {
		return
	}
	v := &clusterView{Cluster: c}
	label := prometheus.Labels{"node": c.Node}
	h.reg.Store(h.m.register(func(r prometheus.Registerer) prometheus.Registerer {
		return prometheus.WrapRegistererWith(label, r)
	}, &clusterCollector{view: v}))
	h.cluster.Store(v)
}

// clusterCollector reads the node's view at each scrape: the members and
// the last round trip to each other member. Its series are the live
// members only, so members that left (a restarted node has a new id)
// leave no series behind.
type clusterCollector struct {
	view *clusterView
}

var (
	clusterMembersDesc = prometheus.NewDesc("troupe_cluster_members",
		"Live members of the cluster as this node sees them, itself included.", nil, nil)
	clusterRTTDesc = prometheus.NewDesc("troupe_cluster_rtt_seconds",
		"The last node-to-node round trip (a Hello over the remote, every 2 s) to each other live member.",
		[]string{"member"}, nil)
	clusterLimitFallbacksDesc = prometheus.NewDesc("troupe_cluster_limit_fallbacks_total",
		"Limit decisions (calls per minute, concurrent calls, sessions) this node took with its own counters "+
			"because the member owning the limit's key did not answer in time.", nil, nil)
)

// Describe implements prometheus.Collector.
func (c *clusterCollector) Describe(ch chan<- *prometheus.Desc) {
	ch <- clusterMembersDesc
	ch <- clusterRTTDesc
	ch <- clusterLimitFallbacksDesc
}

// Collect implements prometheus.Collector.
func (c *clusterCollector) Collect(ch chan<- prometheus.Metric) {
	info := c.view.info()
	ch <- prometheus.MustNewConstMetric(clusterMembersDesc, prometheus.GaugeValue, float64(len(info.Members)))
	ch <- prometheus.MustNewConstMetric(clusterLimitFallbacksDesc, prometheus.CounterValue, float64(info.LimitFallbacks))
	for _, m := range info.Members {
		if m.Self || m.RTTSeconds <= 0 {
			continue
		}
		ch <- prometheus.MustNewConstMetric(clusterRTTDesc, prometheus.GaugeValue, m.RTTSeconds, m.ID)
	}
}
