//go:build !troupe_cluster

package main

import "troupe/app"

// clusterJoin is nil in the default build: troupe never links the
// cluster's libraries (protoactor's remote and cluster, etcd's client),
// which would cost every single process start-up time and memory. A
// clustered config makes serve run troupe-cluster instead (cluster.go).
func clusterJoin() app.JoinCluster { return nil }
