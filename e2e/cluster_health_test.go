package e2e

// Cluster health as an operator meets it: an etcd outage that heals
// without a person, the nodes that refuse to start or to join (and say
// why), and a node that leaves gracefully. The nodes run the troupe built
// without -race (cluster_harness_test.go says why).

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

// TestClusterHealsAfterEtcdOutage: etcd is stopped for 15 s under three
// supervised nodes. While it is away every node answers /readyz 503;
// within 30 s of its return every node answers 200 again, and a session
// made on each node works through every other (the membership agrees).
// A node that had to leave exited with status 1 after logging the
// watchdog's reason, and came back as a new member.
func TestClusterHealsAfterEtcdOutage(t *testing.T) {
	c := newTestCluster(t, "")
	nodes := []*clusterNode{c.startNode(), c.startNode(), c.startNode()}
	for _, n := range nodes {
		n.mu.Lock()
		n.supervise = true
		n.mu.Unlock()
	}
	// The cluster works before the outage.
	if err := crossCheck(t, nodes); err != nil {
		t.Fatalf("before the outage: %v", err)
	}

	c.etcd.stop()
	outage := time.Now()
	unready := map[*clusterNode]bool{}
	for time.Since(outage) < 15*time.Second {
		for _, n := range nodes {
			if st := readyStatus(n); st == http.StatusServiceUnavailable {
				unready[n] = true
			} else if st == http.StatusOK && time.Since(outage) > 5*time.Second {
				t.Errorf("node %s answers /readyz 200 %s after etcd stopped", n.http, time.Since(outage).Round(time.Second))
			}
		}
		time.Sleep(200 * time.Millisecond)
	}
	for _, n := range nodes {
		if !unready[n] {
			t.Errorf("node %s never answered /readyz 503 while etcd was away", n.http)
		}
	}

	c.etcd.start(t)
	back := time.Now()
	// Healed means: every node ready and every session routed through
	// every node, and it stays so for stable with no node restarting (a
	// cluster can look whole the moment etcd returns, before the leases
	// that expired meanwhile make a node leave).
	const stable = 10 * time.Second
	var healed, goodSince time.Duration
	var last error
	restarts := restartCounts(nodes)
	for time.Since(back) < 45*time.Second {
		now := restartCounts(nodes)
		if last = allReady(nodes); last == nil {
			last = crossCheck(t, nodes)
		}
		switch {
		case last != nil || fmt.Sprint(now) != fmt.Sprint(restarts):
			goodSince, restarts = 0, now
		case goodSince == 0:
			goodSince = time.Since(back)
		case time.Since(back)-goodSince >= stable:
			healed = goodSince
		}
		if healed > 0 {
			break
		}
		time.Sleep(250 * time.Millisecond)
	}
	if healed == 0 {
		logNodes(t, nodes)
		t.Fatalf("the cluster did not heal (stay whole for %s) within 45 s of etcd's return: %v", stable, last)
	}
	t.Logf("healed %s after etcd returned (restarts per node: %v)", healed.Round(100*time.Millisecond), restarts)
	if healed > 30*time.Second {
		t.Errorf("the cluster healed only %s after etcd returned (want within ~30 s)", healed.Round(time.Second))
	}
	for _, n := range nodes {
		log := n.log.String()
		n.mu.Lock()
		restarted := n.restarts
		n.mu.Unlock()
		if restarted > 0 {
			if !strings.Contains(log, "troupe exited (exit status 1)") {
				t.Errorf("node %s was restarted but did not exit with status 1", n.http)
			}
			if !strings.Contains(log, "cluster: leaving, to be started again as a new node") {
				t.Errorf("node %s left without logging the watchdog's reason", n.http)
			}
		}
		if left := regexp.MustCompile(`.*cluster: leaving.*`).FindAllString(log, -1); len(left) > 0 {
			t.Logf("node %s restarted %d times: %s", n.http, restarted, strings.Join(left, "\n"))
		}
		noPanic(t, log)
	}
	if t.Failed() {
		logNodes(t, nodes)
	}
}

// TestClusterRefusals: a clustered node without approvals.state_key does
// not start (exit 2, naming the key); a node whose config differs from
// the cluster's does not join (exit 2, naming the section, never ready,
// dropped by the others); a node that cannot reach etcd, or whose
// cluster.listen port is taken, exits 1 with a clear error and no panic.
func TestClusterRefusals(t *testing.T) {
	c := newTestCluster(t, "")
	first, second := c.startNode(), c.startNode()

	t.Run("no state key", func(t *testing.T) {
		cfg, err := os.ReadFile(c.config)
		if err != nil {
			t.Fatal(err)
		}
		path := filepath.Join(t.TempDir(), "troupe.toml")
		keyless := regexp.MustCompile(`(?m)^state_key = .*$`).ReplaceAll(cfg, nil)
		if err := os.WriteFile(path, keyless, 0o600); err != nil {
			t.Fatal(err)
		}
		code, out := runNode(t, c, path, 20*time.Second, nil)
		if code != 2 || !strings.Contains(out, "approvals.state_key") {
			t.Fatalf("exit %d, want 2 naming approvals.state_key; output:\n%s", code, out)
		}
		noPanic(t, out)
	})

	t.Run("differing config", func(t *testing.T) {
		cfg, err := os.ReadFile(c.config)
		if err != nil {
			t.Fatal(err)
		}
		path := filepath.Join(t.TempDir(), "troupe.toml")
		extra := "\n[mcp.extra]\ndescription = \"One tool the others lack.\"\ncommand = \"true\"\nside_effects = []\nrequires_approval = false\n"
		if err := os.WriteFile(path, append(cfg, extra...), 0o600); err != nil {
			t.Fatal(err)
		}
		var served bool
		code, out := runNode(t, c, path, 30*time.Second, func(httpAddr string) {
			if r, err := loopbackClient.Get("http://" + httpAddr + "/readyz"); err == nil {
				served = served || r.StatusCode == http.StatusOK
				r.Body.Close()
			}
		})
		if code != 2 {
			t.Fatalf("exit %d, want 2; output:\n%s", code, out)
		}
		if !strings.Contains(out, "[tools]") || !strings.Contains(out, "differs") {
			t.Fatalf("the log does not name the differing section; output:\n%s", out)
		}
		if served {
			t.Fatalf("the refused node answered /readyz 200")
		}
		noPanic(t, out)
		// The others drop it: etcd holds only the two, and they still
		// route to each other.
		if ids := etcdMemberKeys(t, c); len(ids) != 2 {
			t.Fatalf("etcd holds %d members after the refusal, want 2: %v", len(ids), ids)
		}
		if err := crossCheck(t, []*clusterNode{first, second}); err != nil {
			t.Fatal(err)
		}
	})

	t.Run("etcd unreachable", func(t *testing.T) {
		dead, err := clusterPort()
		if err != nil {
			t.Fatal(err)
		}
		start := time.Now()
		code, out := runNode(t, c, c.config, 40*time.Second, nil,
			"-c", fmt.Sprintf(`cluster.etcd_endpoints=["127.0.0.1:%d"]`, dead))
		took := time.Since(start)
		if code != 1 || !strings.Contains(out, "etcd") {
			t.Fatalf("exit %d, want 1 with a clear error about etcd; output:\n%s", code, out)
		}
		if took > 20*time.Second {
			t.Fatalf("it took %s to give up (the join timeout is 10 s)", took.Round(time.Second))
		}
		noPanic(t, out)
	})

	t.Run("cluster.listen taken", func(t *testing.T) {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		defer ln.Close()
		code, out := runNode(t, c, c.config, 30*time.Second, nil,
			"-c", "cluster.listen="+strconv.Quote(ln.Addr().String()))
		if code != 1 || !strings.Contains(out, "cluster.listen") || !strings.Contains(out, "address already in use") {
			t.Fatalf("exit %d, want 1 naming cluster.listen and the taken address; output:\n%s", code, out)
		}
		noPanic(t, out)
	})
	if ids := etcdMemberKeys(t, c); len(ids) != 2 {
		t.Errorf("etcd holds %d members after the refusals, want 2: %v", len(ids), ids)
	}
}

// TestClusterGracefulLeave: SIGTERM to a node while a call on one of its
// sessions is in flight through another front: the call is answered, the
// node exits 0, and its sessions are gone (404) on the other fronts within
// about a second of its exit.
func TestClusterGracefulLeave(t *testing.T) {
	c := newTestCluster(t, `
[mcp.slow]
description = "Takes two seconds, then says done."
command = "sh"
args = ["-c", "sleep 2; echo done"]
side_effects = []
requires_approval = false
`)
	a, b, d := c.startNode(), c.startNode(), c.startNode()
	sid := b.initialize(t)
	other := d.initialize(t)

	var reply mcpReply
	var wg sync.WaitGroup
	wg.Go(func() {
		reply = a.post(t, sid, map[string]any{"jsonrpc": "2.0", "id": 7, "method": "tools/call",
			"params": map[string]any{"name": "slow", "arguments": map[string]any{}}})
	})
	time.Sleep(700 * time.Millisecond) // the call is running on b
	cmd, exited := b.process()
	b.mu.Lock()
	b.stopping = true
	b.mu.Unlock()
	if err := cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	select {
	case <-exited:
	case <-time.After(30 * time.Second):
		t.Fatalf("node %s did not exit within 30 s of SIGTERM; its log:\n%s", b.http, b.log)
	}
	gone := time.Now()
	if code := cmd.ProcessState.ExitCode(); code != 0 {
		t.Errorf("node %s exited with %v after SIGTERM, want 0", b.http, cmd.ProcessState)
	}
	noPanic(t, b.log.String())
	wg.Wait()
	if reply.status != http.StatusOK || reply.last() == nil {
		t.Errorf("the call in flight was not answered: status %d, %v", reply.status, reply.messages)
	} else if res := reply.last()["result"]; res == nil && reply.last()["error"] == nil {
		t.Errorf("the call in flight got neither a result nor an error: %v", reply.messages)
	} else if res != nil && !strings.Contains(fmt.Sprint(res), "done") {
		t.Errorf("the call in flight did not finish: %v", res)
	}
	// The others drop b at once: its sessions are unknown on every front.
	for _, front := range []*clusterNode{a, d} {
		for {
			r := front.post(t, sid, map[string]any{"jsonrpc": "2.0", "id": 8, "method": "tools/list"})
			if r.status == http.StatusNotFound {
				break
			}
			if time.Since(gone) > 1500*time.Millisecond {
				t.Fatalf("a session of the node that left still answers %d on %s %s after it exited",
					r.status, front.http, time.Since(gone).Round(100*time.Millisecond))
			}
			time.Sleep(50 * time.Millisecond)
		}
	}
	t.Logf("its sessions 404 on every front %s after it exited", time.Since(gone).Round(10*time.Millisecond))
	// The others' sessions keep working.
	if r := a.post(t, other, map[string]any{"jsonrpc": "2.0", "id": 9, "method": "tools/list"}); r.status != http.StatusOK {
		t.Errorf("a session of a node that stayed answers %d through %s", r.status, a.http)
	}
	if t.Failed() {
		t.Logf("node %s's log:\n%s", b.http, b.log)
	}
}

// crossCheck initializes a session on every node and lists its tools
// through every node; it returns the first failure.
func crossCheck(t *testing.T, nodes []*clusterNode) error {
	t.Helper()
	for _, owner := range nodes {
		sid, err := tryInitialize(owner)
		if err != nil {
			return err
		}
		for _, front := range nodes {
			st, err := tryPost(front, sid, map[string]any{"jsonrpc": "2.0", "id": 2, "method": "tools/list"})
			if err != nil || st != http.StatusOK {
				return fmt.Errorf("tools/list of a session of %s through %s: status %d, %v", owner.http, front.http, st, err)
			}
		}
	}
	return nil
}

// tryInitialize is initialize without failing the test: while a cluster
// heals a node may refuse or be restarting.
func tryInitialize(n *clusterNode) (string, error) {
	body := map[string]any{"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": map[string]any{
		"protocolVersion": "2025-06-18", "capabilities": map[string]any{},
		"clientInfo": map[string]any{"name": "cluster-e2e", "version": "1"}}}
	resp, err := n.send(http.MethodPost, "", body)
	if err != nil {
		return "", err
	}
	sid := resp.Header.Get("Mcp-Session-Id")
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK || sid == "" {
		return "", fmt.Errorf("initialize on %s: status %d", n.http, resp.StatusCode)
	}
	st, err := tryPost(n, sid, map[string]any{"jsonrpc": "2.0", "method": "notifications/initialized"})
	if err != nil || st != http.StatusAccepted {
		return "", fmt.Errorf("notifications/initialized on %s: status %d, %v", n.http, st, err)
	}
	return sid, nil
}

func tryPost(n *clusterNode, sid string, msg any) (int, error) {
	resp, err := n.send(http.MethodPost, sid, msg)
	if err != nil {
		return 0, err
	}
	defer resp.Body.Close()
	_, _ = bytes.NewBuffer(nil).ReadFrom(resp.Body)
	return resp.StatusCode, nil
}

// readyStatus is /readyz's status (0 when the node does not answer).
func readyStatus(n *clusterNode) int {
	resp, err := loopbackClient.Get("http://" + n.http + "/readyz")
	if err != nil {
		return 0
	}
	resp.Body.Close()
	return resp.StatusCode
}

func allReady(nodes []*clusterNode) error {
	for _, n := range nodes {
		if st := readyStatus(n); st != http.StatusOK {
			return fmt.Errorf("node %s answers /readyz %d", n.http, st)
		}
	}
	return nil
}

func restartCounts(nodes []*clusterNode) []int {
	counts := make([]int, len(nodes))
	for i, n := range nodes {
		n.mu.Lock()
		counts[i] = n.restarts
		n.mu.Unlock()
	}
	return counts
}

func logNodes(t *testing.T, nodes []*clusterNode) {
	for _, n := range nodes {
		t.Logf("node %s's log:\n%s", n.http, n.log)
	}
}

// noPanic fails when a node's output shows a panic or a stack trace.
func noPanic(t *testing.T, out string) {
	t.Helper()
	if strings.Contains(out, "panic") || strings.Contains(out, "goroutine ") || strings.Contains(out, ".go:") {
		t.Errorf("the output shows a panic or a stack trace:\n%s", out)
	}
}

// runNode runs one troupe node of c's cluster with the config file cfg
// (extra flags after) until it exits, at most timeout; during its run
// poll is called with its HTTP address every 100 ms. It returns the exit
// code and the output.
func runNode(t *testing.T, c *testCluster, cfg string, timeout time.Duration, poll func(httpAddr string), extra ...string) (int, string) {
	t.Helper()
	hp, err1 := clusterPort()
	rp, err2 := clusterPort()
	if err1 != nil || err2 != nil {
		t.Fatal(err1, err2)
	}
	httpAddr := "127.0.0.1:" + strconv.Itoa(hp)
	args := append([]string{"serve", "--config", cfg, "--workspace", c.workspace, "--http", httpAddr,
		"--bearer-token-env", tokenEnv, "--log-level", "debug", "-c", "cluster.listen=" + strconv.Quote("127.0.0.1:"+strconv.Itoa(rp))}, extra...)
	cmd := exec.Command(clusterBinary(t), args...)
	cmd.Env = append(withoutVar(os.Environ(), tokenEnv), tokenEnv+"="+c.token)
	out := &lockedWriter{b: &strings.Builder{}}
	cmd.Stdout, cmd.Stderr = out, out
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan struct{})
	go func() { _ = cmd.Wait(); close(exited) }()
	deadline := time.After(timeout)
	for {
		select {
		case <-exited:
			return cmd.ProcessState.ExitCode(), out.String()
		case <-deadline:
			_ = cmd.Process.Kill()
			<-exited
			t.Fatalf("the node did not exit within %s; output:\n%s", timeout, out)
		case <-time.After(100 * time.Millisecond):
			if poll != nil {
				poll(httpAddr)
			}
		}
	}
}

// etcdMemberKeys lists the member keys etcd holds for the cluster, through
// etcd's JSON gateway.
func etcdMemberKeys(t *testing.T, c *testCluster) []string {
	t.Helper()
	prefix := "/protoactor/troupe/"
	end := []byte(prefix)
	end[len(end)-1]++
	q, _ := json.Marshal(map[string]any{"key": base64.StdEncoding.EncodeToString([]byte(prefix)),
		"range_end": base64.StdEncoding.EncodeToString(end), "keys_only": true})
	resp, err := loopbackClient.Post("http://"+c.etcd.client+"/v3/kv/range", "application/json", bytes.NewReader(q))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var r struct {
		Kvs []struct {
			Key string `json:"key"`
		} `json:"kvs"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&r); err != nil {
		t.Fatal(err)
	}
	var ids []string
	for _, kv := range r.Kvs {
		k, _ := base64.StdEncoding.DecodeString(kv.Key)
		ids = append(ids, string(k))
	}
	return ids
}

// TestClusterNodeStopsWhileEtcdIsAway: SIGTERM to a node while etcd is
// unreachable still ends it, with status 0, within the shutdown grace and
// the bound on leaving (the library's deregistration waits on etcd without
// a deadline).
func TestClusterNodeStopsWhileEtcdIsAway(t *testing.T) {
	c := newTestCluster(t, "")
	n := c.startNode()
	c.etcd.stop()
	for n.ready() {
		time.Sleep(100 * time.Millisecond)
	}
	cmd, exited := n.process()
	n.mu.Lock()
	n.stopping = true
	n.mu.Unlock()
	start := time.Now()
	_ = cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-exited:
		if code := cmd.ProcessState.ExitCode(); code != 0 {
			t.Errorf("exit %v after SIGTERM; log:\n%s", cmd.ProcessState, n.log)
		}
		t.Logf("exited %v after SIGTERM", time.Since(start).Round(100*time.Millisecond))
	case <-time.After(30 * time.Second):
		_ = cmd.Process.Kill()
		<-exited
		t.Fatalf("a node did not exit within 30 s of SIGTERM while etcd was away; log:\n%s", n.log)
	}
}
