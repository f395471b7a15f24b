package cluster

import (
	"context"
	"net"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
)

// testEtcd starts Debian's etcd on two free loopback ports, in a
// directory of the test's, as the e2e cluster harness does
// (e2e/cluster_harness_test.go), and returns its client endpoint; Cleanup
// stops it.
func testEtcd(t *testing.T) string {
	t.Helper()
	if _, err := exec.LookPath("etcd"); err != nil {
		t.Fatal("etcd is not installed (scripts/test installs Debian's etcd-server)")
	}
	client, peer := loopbackPort(t), loopbackPort(t)
	dir := t.TempDir()
	var log syncBuffer
	cmd := exec.Command("etcd", "--name", "unit", "--data-dir", filepath.Join(dir, "data"),
		"--listen-client-urls", "http://"+client, "--advertise-client-urls", "http://"+client,
		"--listen-peer-urls", "http://"+peer, "--initial-advertise-peer-urls", "http://"+peer,
		"--initial-cluster", "unit=http://"+peer, "--log-level", "warn")
	cmd.Stdout, cmd.Stderr = &log, &log
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL} // ends with the tests, whatever happens
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan struct{})
	go func() { _ = cmd.Wait(); close(exited) }()
	t.Cleanup(func() {
		_ = cmd.Process.Signal(syscall.SIGTERM)
		select {
		case <-exited:
		case <-time.After(10 * time.Second):
			_ = cmd.Process.Kill()
			<-exited
		}
	})
	cli := testEtcdClient(t, client)
	deadline := time.Now().Add(30 * time.Second)
	for {
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		_, err := cli.Get(ctx, "health")
		cancel()
		if err == nil {
			return client
		}
		select {
		case <-exited:
			t.Fatalf("etcd exited: %s", log.String())
		default:
		}
		if time.Now().After(deadline) {
			t.Fatalf("etcd did not answer: %v\n%s", err, log.String())
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// testEtcdClient is an etcd client as a node makes it, closed at Cleanup.
func testEtcdClient(t *testing.T, endpoint string) *clientv3.Client {
	t.Helper()
	cli, err := clientv3.New(etcdConfig([]string{endpoint}, 5*time.Second))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cli.Close() })
	return cli
}

// loopbackPort is a free port on 127.0.0.1 ("127.0.0.1:port").
func loopbackPort(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	return "127.0.0.1:" + strconv.Itoa(ln.Addr().(*net.TCPAddr).Port)
}

// syncBuffer is a strings.Builder for a process's output and a test's
// reads.
type syncBuffer struct {
	mu sync.Mutex
	b  strings.Builder
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}
