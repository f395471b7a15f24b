package e2e

// The cluster harness: Debian's etcd on loopback, a CA and a node
// certificate for mutual TLS, and several troupe processes joined as one
// cluster. Every node is a troupe binary built WITHOUT -race, even when
// these tests run under -race: protoactor's cluster (at the only version
// the module proxy serves) races inside the library whenever membership
// changes (its block list, its member list against gossip, its informer),
// which these tests make happen on purpose. troupe's own code runs under
// -race in every other test, and the cluster package's units do.

import (
	"bufio"
	"bytes"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/hex"
	"encoding/json"
	"encoding/pem"
	"fmt"
	"io"
	"math/big"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

var (
	clusterBuildOnce sync.Once
	clusterBuildErr  error
)

// clusterBinary is troupe as an operator starts a node: the default build,
// which runs troupe-cluster (built with -tags troupe_cluster, and WITHOUT
// -race: see the file comment) from beside itself when the config sets
// cluster.provider.
func clusterBinary(t *testing.T) string {
	t.Helper()
	bin := troupeBinary(t)
	clusterBuildOnce.Do(func() {
		cmd := exec.Command("go", "build", "-tags", "troupe_cluster", "-o", filepath.Join(filepath.Dir(bin), "troupe-cluster"), "./cmd/troupe")
		cmd.Dir = moduleRoot
		if out, err := cmd.CombinedOutput(); err != nil {
			clusterBuildErr = fmt.Errorf("go build: %v\n%s", err, out)
		}
	})
	if clusterBuildErr != nil {
		t.Fatal(clusterBuildErr)
	}
	return bin
}

// clusterPort returns a free loopback port below Linux's ephemeral range
// (32768-60999): freePort's ports come from that range, where every
// outgoing connection of the nodes (gRPC between them, etcd clients) also
// takes its local port, and one did take a node's port between freePort
// and the node's listen often enough to fail a cluster test.
func clusterPort() (int, error) {
	for range 100 {
		var b [2]byte
		if _, err := rand.Read(b[:]); err != nil {
			return 0, err
		}
		port := 20000 + (int(b[0])<<8|int(b[1]))%12000
		ln, err := net.Listen("tcp", "127.0.0.1:"+strconv.Itoa(port))
		if err == nil {
			ln.Close()
			return port, nil
		}
	}
	return freePort()
}

// dieWithTheTests makes a process the tests start end with the test
// binary even when it cannot clean up (a panic, a timeout's exit): an etcd
// or a node left running would hold ports and disk for the next run.
func dieWithTheTests() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
}

// etcdServer is Debian's etcd (3.4) serving one member on loopback.
type etcdServer struct {
	dir, client, peer string
	cmd               *exec.Cmd
	exited            chan struct{}
	log               *lockedWriter
}

// startEtcd starts etcd on two free loopback ports, in a directory of
// the test's; Cleanup stops it.
func startEtcd(t *testing.T) *etcdServer {
	t.Helper()
	if _, err := exec.LookPath("etcd"); err != nil {
		t.Fatal("etcd is not installed (scripts/test installs Debian's etcd-server)")
	}
	cp, err1 := clusterPort()
	pp, err2 := clusterPort()
	if err1 != nil || err2 != nil {
		t.Fatal(err1, err2)
	}
	e := &etcdServer{dir: t.TempDir(), client: "127.0.0.1:" + strconv.Itoa(cp), peer: "127.0.0.1:" + strconv.Itoa(pp)}
	e.start(t)
	t.Cleanup(func() { e.stop() })
	return e
}

// start runs etcd (again, on the same data after stop) and waits until it
// answers.
func (e *etcdServer) start(t *testing.T) {
	t.Helper()
	e.log = &lockedWriter{b: &strings.Builder{}}
	e.exited = make(chan struct{})
	e.cmd = exec.Command("etcd", "--name", "e2e", "--data-dir", filepath.Join(e.dir, "data"),
		"--listen-client-urls", "http://"+e.client, "--advertise-client-urls", "http://"+e.client,
		"--listen-peer-urls", "http://"+e.peer, "--initial-advertise-peer-urls", "http://"+e.peer,
		"--initial-cluster", "e2e=http://"+e.peer, "--log-level", "warn")
	e.cmd.Stdout, e.cmd.Stderr = e.log, e.log
	e.cmd.SysProcAttr = dieWithTheTests()
	if err := e.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() { _ = e.cmd.Wait(); close(e.exited) }()
	deadline := time.Now().Add(30 * time.Second)
	for {
		resp, err := loopbackClient.Get("http://" + e.client + "/health")
		if err == nil {
			body, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			if bytes.Contains(body, []byte(`"true"`)) {
				return
			}
		}
		select {
		case <-e.exited:
			t.Fatalf("etcd exited: %s", e.log)
		case <-time.After(50 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			t.Fatalf("etcd did not become healthy: %s", e.log)
		}
	}
}

// stop ends etcd (its data stays for start).
func (e *etcdServer) stop() {
	if e.cmd == nil || e.cmd.Process == nil {
		return
	}
	select {
	case <-e.exited:
		return
	default:
	}
	_ = e.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-e.exited:
	case <-time.After(10 * time.Second):
		_ = e.cmd.Process.Kill()
		<-e.exited
	}
}

// clusterCerts writes a CA and one node certificate (every node may share
// it: nodes verify each other by the CA alone) into dir.
func clusterCerts(t *testing.T, dir string) (ca, cert, key string) {
	t.Helper()
	caKey, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	caTmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "troupe e2e CA"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(24 * time.Hour),
		IsCA: true, BasicConstraintsValid: true, KeyUsage: x509.KeyUsageCertSign}
	caDER, err := x509.CreateCertificate(rand.Reader, caTmpl, caTmpl, &caKey.PublicKey, caKey)
	if err != nil {
		t.Fatal(err)
	}
	caCert, _ := x509.ParseCertificate(caDER)
	nodeKey, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	nodeTmpl := &x509.Certificate{SerialNumber: big.NewInt(2), Subject: pkix.Name{CommonName: "troupe node"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(24 * time.Hour),
		KeyUsage:    x509.KeyUsageDigitalSignature,
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth, x509.ExtKeyUsageClientAuth},
		IPAddresses: []net.IP{net.ParseIP("127.0.0.1")}, DNSNames: []string{"localhost"}}
	nodeDER, err := x509.CreateCertificate(rand.Reader, nodeTmpl, caCert, &nodeKey.PublicKey, caKey)
	if err != nil {
		t.Fatal(err)
	}
	keyDER, _ := x509.MarshalECPrivateKey(nodeKey)
	ca, cert, key = filepath.Join(dir, "ca.pem"), filepath.Join(dir, "node.pem"), filepath.Join(dir, "node-key.pem")
	for path, block := range map[string]*pem.Block{ca: {Type: "CERTIFICATE", Bytes: caDER},
		cert: {Type: "CERTIFICATE", Bytes: nodeDER}, key: {Type: "EC PRIVATE KEY", Bytes: keyDER}} {
		if err := os.WriteFile(path, pem.EncodeToMemory(block), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	return ca, cert, key
}

// testCluster is etcd, the TLS files, a workspace and a config shared by
// the nodes started with startNode.
type testCluster struct {
	t         *testing.T
	etcd      *etcdServer
	workspace string
	config    string // the config file every node reads
	token     string

	mu    sync.Mutex
	nodes []*clusterNode // started by startNode, stopped together at the end
}

// stopAll stops every node at once (each leave takes the library about
// 2 s: one after another, they would add up), before etcd stops.
func (c *testCluster) stopAll() {
	c.mu.Lock()
	nodes := c.nodes
	c.mu.Unlock()
	var wg sync.WaitGroup
	for _, n := range nodes {
		wg.Go(func() { n.stop(c.t) })
	}
	wg.Wait()
}

// clusterConfig is the [cluster]-less part of the nodes' config; extra
// TOML is appended (command tools, approvals).
//
// The cluster tests run beside each other (two at a time with go test's
// default -parallel on two cores), after the package's serial tests: each
// has its own etcd and ports.
func newTestCluster(t *testing.T, extra string) *testCluster {
	t.Helper()
	t.Parallel()
	c := &testCluster{t: t, etcd: startEtcd(t), workspace: t.TempDir(), token: newToken(t)}
	dir := t.TempDir()
	t.Cleanup(c.stopAll) // before etcd and the directories go
	ca, cert, key := clusterCerts(t, dir)
	c.config = filepath.Join(dir, "troupe.toml")
	cfg := fmt.Sprintf(`[approvals]
state_key = "%s"

[cluster]
provider = "etcd"
etcd_endpoints = ["%s"]
tls_ca_file = "%s"
tls_cert_file = "%s"
tls_key_file = "%s"
%s`, stateKey(t), c.etcd.client, ca, cert, key, extra)
	if err := os.WriteFile(c.config, []byte(cfg), 0o600); err != nil {
		t.Fatal(err)
	}
	return c
}

// stateKey is a fresh approvals.state_key (32 random bytes, hex).
func stateKey(t *testing.T) string {
	var b [32]byte
	if _, err := rand.Read(b[:]); err != nil {
		t.Fatal(err)
	}
	return hex.EncodeToString(b[:])
}

// clusterNode is one troupe process of a testCluster.
type clusterNode struct {
	c         *testCluster
	http      string // host:port of MCP
	url       string
	remote    string // host:port of node-to-node traffic
	extra     []string
	env       []string // added to the process's environment
	cmd       *exec.Cmd
	exited    chan struct{}
	log       *lockedWriter
	supervise bool // restart on exit, as systemd's Restart=on-failure does
	mu        sync.Mutex
	restarts  int
	stopping  bool
}

// startNode starts a node and waits until /readyz answers 200. A port
// that another process took between freePort and the node's bind (other
// tests run clusters on the same machine) is retried with new ports.
func (c *testCluster) startNode(extra ...string) *clusterNode {
	c.t.Helper()
	return c.startNodeEnv(nil, extra...)
}

// startNodeEnv is startNode with variables added to the node's
// environment (NAME=value).
func (c *testCluster) startNodeEnv(env []string, extra ...string) *clusterNode {
	c.t.Helper()
	for attempt := 1; ; attempt++ {
		hp, err1 := clusterPort()
		rp, err2 := clusterPort()
		if err1 != nil || err2 != nil {
			c.t.Fatal(err1, err2)
		}
		n := &clusterNode{c: c, http: "127.0.0.1:" + strconv.Itoa(hp), remote: "127.0.0.1:" + strconv.Itoa(rp), extra: extra, env: env,
			log: &lockedWriter{b: &strings.Builder{}}}
		n.url = "http://" + n.http + "/mcp"
		n.spawn()
		if !n.waitReady(45 * time.Second) {
			_, exited := n.process()
			select {
			case <-exited:
				if attempt < 3 && strings.Contains(n.log.String(), "address already in use") {
					continue
				}
			default:
			}
			n.stop(c.t)
			c.t.Fatalf("node %s did not become ready; its log:\n%s", n.http, n.log)
		}
		c.mu.Lock()
		c.nodes = append(c.nodes, n)
		c.mu.Unlock()
		return n
	}
}

func (n *clusterNode) args() []string {
	return append([]string{"serve", "--config", n.c.config, "--workspace", n.c.workspace, "--http", n.http,
		"--bearer-token-env", tokenEnv, "--log-level", "debug", "-c", "cluster.listen=" + strconv.Quote(n.remote)}, n.extra...)
}

// spawn starts the process (again); with supervise, a process that exits
// on its own is started again after a second.
func (n *clusterNode) spawn() {
	cmd := exec.Command(clusterBinary(n.c.t), n.args()...)
	cmd.Env = append(append(withoutVar(os.Environ(), tokenEnv), tokenEnv+"="+n.c.token), n.env...)
	cmd.Stdout, cmd.Stderr = n.log, n.log
	cmd.SysProcAttr = dieWithTheTests()
	exited := make(chan struct{})
	if err := cmd.Start(); err != nil {
		n.c.t.Fatal(err)
	}
	n.mu.Lock()
	n.cmd, n.exited = cmd, exited
	n.mu.Unlock()
	go func() {
		_ = cmd.Wait()
		close(exited)
		n.mu.Lock()
		again := n.supervise && !n.stopping
		if again {
			n.restarts++
		}
		n.mu.Unlock()
		if again {
			fmt.Fprintf(n.log, "\n--- harness: troupe exited (%v); starting it again ---\n", cmd.ProcessState)
			time.Sleep(time.Second)
			n.spawn()
		}
	}()
}

// process returns the current process and its exit channel.
func (n *clusterNode) process() (*exec.Cmd, chan struct{}) {
	n.mu.Lock()
	defer n.mu.Unlock()
	return n.cmd, n.exited
}

// ready reports whether /readyz answers 200.
func (n *clusterNode) ready() bool {
	resp, err := loopbackClient.Get("http://" + n.http + "/readyz")
	if err != nil {
		return false
	}
	resp.Body.Close()
	return resp.StatusCode == http.StatusOK
}

func (n *clusterNode) waitReady(timeout time.Duration) bool {
	deadline := time.Now().Add(timeout)
	for !n.ready() {
		_, exited := n.process()
		n.mu.Lock()
		supervised := n.supervise
		n.mu.Unlock()
		select {
		case <-exited:
			if !supervised {
				return false
			}
		default:
		}
		if time.Now().After(deadline) {
			return false
		}
		time.Sleep(100 * time.Millisecond)
	}
	return true
}

// kill9 kills the node's process at once (no leave, no drain).
func (n *clusterNode) kill9() {
	n.mu.Lock()
	n.stopping = true
	cmd, exited := n.cmd, n.exited
	n.mu.Unlock()
	_ = cmd.Process.Kill()
	<-exited
}

// stop sends SIGTERM and requires a clean exit (status 0).
func (n *clusterNode) stop(t *testing.T) {
	n.mu.Lock()
	wasStopping := n.stopping
	n.stopping = true
	cmd, exited := n.cmd, n.exited
	n.mu.Unlock()
	select {
	case <-exited:
		if !wasStopping {
			t.Errorf("node %s exited before the test ended: %v", n.http, cmd.ProcessState)
		}
	default:
		_ = cmd.Process.Signal(syscall.SIGTERM)
		select {
		case <-exited:
			if code := cmd.ProcessState.ExitCode(); code != 0 {
				t.Errorf("node %s exited with %v after SIGTERM", n.http, cmd.ProcessState)
			}
		case <-time.After(30 * time.Second):
			_ = cmd.Process.Kill()
			<-exited
			t.Errorf("node %s did not exit within 30 s of SIGTERM", n.http)
		}
	}
	if t.Failed() {
		t.Logf("node %s's log:\n%s", n.http, n.log)
	}
}

// mcpReply is one POST's answer: the status, the session id header, and
// the JSON-RPC messages it carried (one for JSON, every event for SSE).
type mcpReply struct {
	status    int
	sessionID string
	messages  []map[string]any
}

// last is the reply's last message (the response of a request).
func (r mcpReply) last() map[string]any {
	if len(r.messages) == 0 {
		return nil
	}
	return r.messages[len(r.messages)-1]
}

// clusterClient sends the requests of these tests without keep-alive, so
// that no idle connection stays open in a node (and counts among its
// goroutines and fds) after a request. A request and its streamed answer
// take 90 s at most.
var clusterClient = &http.Client{Transport: &http.Transport{Proxy: nil, DisableKeepAlives: true}, Timeout: 90 * time.Second}

// send makes one request to node n's /mcp in session sid ("" for none),
// with the token and the session's protocol version; extra are header
// name/value pairs. The caller reads and closes the body.
func (n *clusterNode) send(method, sid string, body any, extra ...string) (*http.Response, error) {
	var rd io.Reader
	if body != nil {
		b, err := json.Marshal(body)
		if err != nil {
			return nil, err
		}
		rd = bytes.NewReader(b)
	}
	req, err := http.NewRequest(method, n.url, rd)
	if err != nil {
		return nil, err
	}
	req.Header.Set("Authorization", "Bearer "+n.c.token)
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Accept", "application/json, text/event-stream")
	}
	if method == http.MethodGet {
		req.Header.Set("Accept", "text/event-stream")
	}
	if sid != "" {
		req.Header.Set("Mcp-Session-Id", sid)
		req.Header.Set("Mcp-Protocol-Version", "2025-06-18")
	}
	for i := 0; i+1 < len(extra); i += 2 {
		req.Header.Set(extra[i], extra[i+1])
	}
	return clusterClient.Do(req)
}

// post sends one JSON-RPC message to node n in session sid ("" for none).
func (n *clusterNode) post(t *testing.T, sid string, msg any) mcpReply {
	t.Helper()
	resp, err := n.send(http.MethodPost, sid, msg)
	if err != nil {
		t.Fatalf("POST to %s: %v", n.http, err)
	}
	defer resp.Body.Close()
	r := mcpReply{status: resp.StatusCode, sessionID: resp.Header.Get("Mcp-Session-Id")}
	if strings.HasPrefix(resp.Header.Get("Content-Type"), "text/event-stream") {
		sc := bufio.NewScanner(resp.Body)
		sc.Buffer(make([]byte, 1<<20), 16<<20)
		for sc.Scan() {
			if data, ok := strings.CutPrefix(sc.Text(), "data: "); ok {
				var m map[string]any
				if json.Unmarshal([]byte(data), &m) == nil {
					r.messages = append(r.messages, m)
				}
			}
		}
		return r
	}
	raw, _ := io.ReadAll(resp.Body)
	var m map[string]any
	if json.Unmarshal(raw, &m) == nil {
		r.messages = append(r.messages, m)
	}
	return r
}

// initialize opens a session on node n (which owns it), declaring no
// client capabilities, and sends notifications/initialized; it returns the
// session id.
func (n *clusterNode) initialize(t *testing.T) string {
	t.Helper()
	return n.initializeAs(t, map[string]any{})
}

// statelessSend sends one 2026-07-28 request (raw JSON-RPC, with the
// headers the revision requires; name is Mcp-Name) to node n and returns
// the status and the answer.
func (n *clusterNode) statelessSend(t *testing.T, method, name, body string) (int, map[string]any) {
	t.Helper()
	resp, err := n.send(http.MethodPost, "", json.RawMessage(body),
		"MCP-Protocol-Version", "2026-07-28", "Mcp-Method", method, "Mcp-Name", name)
	if err != nil {
		t.Fatalf("POST to %s: %v", n.http, err)
	}
	defer resp.Body.Close()
	raw, _ := io.ReadAll(resp.Body)
	var m map[string]any
	if err := json.Unmarshal(bytes.TrimSpace(raw), &m); err != nil {
		return resp.StatusCode, map[string]any{"notJSON": string(raw)}
	}
	return resp.StatusCode, m
}
