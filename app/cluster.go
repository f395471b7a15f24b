package app

import (
	"errors"
	"fmt"
	"log/slog"

	"troupe/cluster"
	"troupe/config"
)

// joinCluster makes this process a node of the cluster [cluster]
// configures, or returns nil when it configures none (one process, no
// remote started). lost is told, once, when the node must leave (the
// watchdog's verdict): Run then drains and returns an error, and the
// process manager starts troupe again as a new node.
func joinCluster(cfg *config.Config, log, runtimeLog *slog.Logger, lost func(error)) (*cluster.Node, error) {
	c := cfg.Cluster
	if c.Provider == "" {
		return nil, nil
	}
	if cfg.HTTP.Listen == "" {
		return nil, &SetupError{Config: true, Problems: []error{
			errors.New("cluster.provider is set but http.listen is not: a cluster node serves MCP over HTTP")}}
	}
	node, err := cluster.Start(cluster.Options{
		Name:          c.Name,
		Listen:        c.Listen,
		Advertise:     c.Advertise,
		EtcdEndpoints: c.EtcdEndpoints,
		TLS:           cluster.TLSFiles{CertFile: c.TLSCertFile, KeyFile: c.TLSKeyFile, CAFile: c.TLSCAFile, Insecure: c.TLSInsecure},
		Fingerprint:   cfg.ClusterFingerprint(),
		Logger:        log,
		RuntimeLogger: runtimeLog,
		Lost:          lost,
	})
	var mismatch *cluster.ConfigMismatchError
	if errors.As(err, &mismatch) {
		return nil, &SetupError{Config: true, Problems: []error{err}}
	}
	if err != nil {
		return nil, fmt.Errorf("cannot join the cluster: %w", err)
	}
	return node, nil
}
