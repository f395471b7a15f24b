package main

import (
	"fmt"
	"os"
	"path/filepath"
	"syscall"
)

// clusterBinary is the build of troupe that can join a cluster, installed
// beside troupe (go build -tags troupe_cluster -o troupe-cluster ./cmd/troupe).
const clusterBinary = "troupe-cluster"

// execClusterBuild replaces this process with troupe-cluster from beside
// the running executable, with the same arguments and environment, when
// this build cannot join the cluster the config asks for. The process
// keeps its pid, stdio and signals (a service manager sees one process).
// It returns only on failure.
func execClusterBuild() error {
	self, err := os.Executable()
	if err != nil {
		return fmt.Errorf("cluster.provider is set, and troupe cannot find itself to run %s: %w", clusterBinary, err)
	}
	path := filepath.Join(filepath.Dir(self), clusterBinary)
	if _, err := os.Stat(path); err != nil {
		return fmt.Errorf("cluster.provider is set, but %s is not installed beside troupe (%s): build it with "+
			"go build -tags troupe_cluster -o %s ./cmd/troupe", clusterBinary, filepath.Dir(self), clusterBinary)
	}
	args := append([]string{clusterBinary}, os.Args[1:]...)
	return fmt.Errorf("cannot run %s: %w", path, syscall.Exec(path, args, os.Environ()))
}
