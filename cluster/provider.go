package cluster

import (
	"context"
	"fmt"
	"log/slog"
	"strings"
	"time"

	pcluster "github.com/asynkron/protoactor-go/cluster"
	"github.com/asynkron/protoactor-go/cluster/clusterproviders/etcd"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"
)

// etcdKeyPrefix is where protoactor's etcd provider keeps members: one key
// per member, "<prefix>/<cluster>/<cluster>@<member id>", on a lease.
const etcdKeyPrefix = "/protoactor"

// etcdProvider is protoactor's etcd membership provider, made only when the
// member starts: the etcd client starts gRPC, and making it before the
// remote has started races on gRPC's process-wide logger. It also checks
// that etcd answers before the library's calls, which wait without a
// deadline, would hang the start.
type etcdProvider struct {
	endpoints []string
	timeout   time.Duration
	log       *slog.Logger
	inner     *etcd.Provider
}

// StartMember implements pcluster.ClusterProvider.
func (p *etcdProvider) StartMember(c *pcluster.Cluster) error {
	if err := p.reachable(); err != nil {
		return err
	}
	inner, err := etcd.NewWithConfig(etcdKeyPrefix, etcdConfig(p.endpoints, p.timeout))
	if err != nil {
		return fmt.Errorf("etcd client: %w", err)
	}
	p.inner = inner
	return inner.StartMember(c)
}

// StartClient implements pcluster.ClusterProvider; troupe's nodes are
// always members.
func (p *etcdProvider) StartClient(*pcluster.Cluster) error {
	return fmt.Errorf("troupe nodes join as members, never as clients")
}

// Shutdown implements pcluster.ClusterProvider: the member's key is
// deleted, so the others drop it at once instead of at the lease's end.
//
// The library deletes the key without a deadline, which waits forever
// while etcd is away: the wait is bounded by leaveTimeout, and the others
// then drop this node when its lease ends instead.
func (p *etcdProvider) Shutdown(graceful bool) error {
	if p.inner == nil {
		return nil
	}
	done := make(chan error, 1)
	go func() { done <- p.inner.Shutdown(graceful) }() // ends when etcd answers, or with the process
	t := time.NewTimer(leaveTimeout)
	defer t.Stop()
	select {
	case err := <-done:
		return err
	case <-t.C:
		if p.log != nil {
			p.log.Warn("cluster: etcd did not answer while leaving; the others drop this node when its lease ends",
				"waited", leaveTimeout)
		}
		return fmt.Errorf("etcd did not answer within %s", leaveTimeout)
	}
}

// leaveTimeout bounds the wait for etcd when a node leaves.
const leaveTimeout = 3 * time.Second

// reachable asks etcd for the cluster's keys within the provider's timeout.
func (p *etcdProvider) reachable() error {
	cli, err := clientv3.New(etcdConfig(p.endpoints, p.timeout))
	if err != nil {
		return fmt.Errorf("etcd client: %w", err)
	}
	defer cli.Close()
	ctx, cancel := context.WithTimeout(context.Background(), p.timeout)
	defer cancel()
	if _, err := cli.Get(ctx, etcdKeyPrefix, clientv3.WithPrefix(), clientv3.WithCountOnly()); err != nil {
		return fmt.Errorf("etcd at %s does not answer: %w", strings.Join(p.endpoints, ", "), err)
	}
	return nil
}

// etcdConfig is the configuration of every etcd client troupe makes. The
// client's own logger is silenced: it writes JSON lines of its own (with
// its source file and line) straight to stderr, past troupe's log and its
// redaction, and repeats them every retry while etcd is away. What matters
// reaches troupe's log as its errors: the join's, and the watchdog's
// readiness changes.
func etcdConfig(endpoints []string, dialTimeout time.Duration) clientv3.Config {
	return clientv3.Config{Endpoints: endpoints, DialTimeout: dialTimeout, Logger: zap.NewNop()}
}

// etcdMembers reads the member ids etcd holds for a cluster.
func etcdMembers(ctx context.Context, cli *clientv3.Client, name string) ([]string, error) {
	resp, err := cli.Get(ctx, etcdKeyPrefix+"/"+name+"/", clientv3.WithPrefix(), clientv3.WithKeysOnly())
	if err != nil {
		return nil, err
	}
	ids := make([]string, 0, len(resp.Kvs))
	for _, kv := range resp.Kvs {
		key := string(kv.Key)
		ids = append(ids, memberID(key[strings.LastIndexByte(key, '/')+1:]))
	}
	return ids, nil
}
