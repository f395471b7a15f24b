//go:build troupe_cluster

package main

import (
	"log/slog"

	"troupe/app"
	"troupe/cluster"
	"troupe/config"
)

// clusterJoin is this build's way to join a cluster: the troupe-cluster
// binary (go build -tags troupe_cluster) links package cluster.
func clusterJoin() app.JoinCluster {
	return func(cfg *config.Config, log, runtimeLog *slog.Logger, lost func(error)) (app.ClusterNode, error) {
		n, err := cluster.Join(cfg, log, runtimeLog, lost)
		if err != nil {
			return nil, err
		}
		return n, nil
	}
}
