//go:build !race

// The library's Remote.Start sets gRPC's process-wide logger, which a
// running remote reads: two remotes in one binary race inside the library
// (not in troupe). So these tests run without -race; scripts/test runs
// them on their own for that reason.

package cluster

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/asynkron/protoactor-go/actor"
	pcluster "github.com/asynkron/protoactor-go/cluster"
	"github.com/asynkron/protoactor-go/remote"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
)

// These tests run two nodes' remotes (no membership: the library's
// membership races under -race when it changes, and only one member may
// live in a test binary) and give the front its topology by hand, so the
// tunnel itself (Forward, the tunnel actor, ownerRequest, the window) is
// tested with real remote traffic.

// testNode is a Node with a started remote and a tunnel, but no cluster.
func testNode(t *testing.T, h http.Handler) *Node {
	t.Helper()
	n := &Node{log: slog.New(slog.DiscardHandler), stop: make(chan struct{}), done: make(chan struct{})}
	n.system = actor.NewActorSystem(actor.WithLoggerFactory(func(*actor.ActorSystem) *slog.Logger {
		return slog.New(slog.DiscardHandler)
	}))
	r := remote.NewRemote(n.system, remote.Configure("127.0.0.1", 0,
		remote.WithDialOptions(grpc.WithTransportCredentials(insecure.NewCredentials()))))
	r.Start()
	n.self = n.system.ID
	n.sub = n.system.EventStream.Subscribe(n.event)
	tun := &tunnel{handler: &n.handler, self: n.self, log: n.log}
	var err error
	if n.tunnel, err = n.system.Root.SpawnNamed(actor.PropsFromProducer(func() actor.Actor { return tun }), tunnelName); err != nil {
		t.Fatal(err)
	}
	if h != nil {
		n.Serve(h)
	}
	t.Cleanup(func() { r.Shutdown(false); n.system.Shutdown() })
	return n
}

// knows makes front see owner as a live member.
func knows(front, owner *Node) {
	front.topology.Store(&Topology{Members: []Member{{ID: owner.self, Address: owner.system.Address()}},
		byID: map[string]string{owner.self: owner.system.Address()}})
}

// frontServer serves every request by forwarding it to owner.
func frontServer(t *testing.T, front, owner *Node) *httptest.Server {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		if err := front.Forward(w, r, body, owner.self); err != nil {
			http.Error(w, err.Error(), http.StatusTeapot)
		}
	}))
	t.Cleanup(srv.Close)
	return srv
}

func TestForwardCarriesAJSONAnswer(t *testing.T) {
	owner := testNode(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		w.Header().Set("Content-Type", "application/json")
		w.Header().Set("Mcp-Session-Id", r.Header.Get("Mcp-Session-Id"))
		w.WriteHeader(http.StatusCreated)
		fmt.Fprintf(w, `{"method":%q,"host":%q,"body":%s}`, r.Method, r.Host, body)
	}))
	front := testNode(t, nil)
	knows(front, owner)
	srv := frontServer(t, front, owner)
	req, _ := http.NewRequest(http.MethodPost, srv.URL+"/mcp?x=1", strings.NewReader(`{"a":1}`))
	req.Header.Set("Mcp-Session-Id", "abc")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	got, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != http.StatusCreated || resp.Header.Get("Mcp-Session-Id") != "abc" ||
		!bytes.Contains(got, []byte(`"body":{"a":1}`)) || !bytes.Contains(got, []byte(`"method":"POST"`)) {
		t.Fatalf("status %d, headers %v, body %s", resp.StatusCode, resp.Header, got)
	}
}

func TestForwardStreamsInOrderThroughTheWindow(t *testing.T) {
	const events = 20 * window
	owner := testNode(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/event-stream")
		rc := http.NewResponseController(w)
		for i := range events {
			_ = rc.SetWriteDeadline(time.Now().Add(10 * time.Second))
			fmt.Fprintf(w, "data: %d\n\n", i)
			if err := rc.Flush(); err != nil {
				return
			}
		}
	}))
	front := testNode(t, nil)
	knows(front, owner)
	srv := frontServer(t, front, owner)
	resp, err := http.Get(srv.URL)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	sc := bufio.NewScanner(resp.Body)
	next := 0
	for sc.Scan() {
		line := sc.Text()
		if line == "" {
			continue
		}
		if line != fmt.Sprintf("data: %d", next) {
			t.Fatalf("event %d: got %q", next, line)
		}
		next++
		if next%window == 0 {
			time.Sleep(20 * time.Millisecond) // a slow reader: the owner waits, nothing piles up
		}
	}
	if next != events {
		t.Fatalf("got %d events, want %d", next, events)
	}
}

func TestForwardStopsTheOwnersHandlerWhenTheClientLeaves(t *testing.T) {
	stopped := make(chan struct{})
	owner := testNode(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/event-stream")
		w.WriteHeader(http.StatusOK)
		http.NewResponseController(w).Flush()
		<-r.Context().Done()
		close(stopped)
	}))
	front := testNode(t, nil)
	knows(front, owner)
	srv := frontServer(t, front, owner)
	ctx, cancel := context.WithCancel(context.Background())
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, srv.URL, nil)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	cancel()
	resp.Body.Close()
	select {
	case <-stopped:
	case <-time.After(5 * time.Second):
		t.Fatal("the owner's handler still runs after the client left")
	}
}

func TestForwardEndsAStreamWhoseOwnerIsLost(t *testing.T) {
	var started atomic.Bool
	owner := testNode(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/event-stream")
		w.WriteHeader(http.StatusOK)
		http.NewResponseController(w).Flush()
		started.Store(true)
		<-r.Context().Done()
	}))
	front := testNode(t, nil)
	knows(front, owner)
	srv := frontServer(t, front, owner)
	req, _ := http.NewRequest(http.MethodPost, srv.URL, strings.NewReader(`{"jsonrpc":"2.0","id":7,"method":"tools/call"}`))
	req.Header.Set("Mcp-Session-Id", "0123456789abcdef0123456789abcdef."+owner.self)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	for !started.Load() {
		time.Sleep(time.Millisecond)
	}
	front.event(&pcluster.ClusterTopology{}) // the membership dropped the owner
	got, _ := io.ReadAll(resp.Body)
	if !bytes.Contains(got, []byte(`"id":7`)) || !bytes.Contains(got, []byte(`session 01234567… was lost`)) {
		t.Fatalf("the stream ended with %q", got)
	}
}

func TestForwardRefusesAnUnknownMemberAndALostOneBeforeTheHead(t *testing.T) {
	front := testNode(t, nil)
	if err := front.Forward(httptest.NewRecorder(), httptest.NewRequest("GET", "/mcp", nil), nil, "nobody"); err != ErrUnknownMember {
		t.Fatalf("unknown member: %v", err)
	}
	// An owner whose answer never comes, then is dropped: 404.
	owner := testNode(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { <-r.Context().Done() }))
	knows(front, owner)
	srv := frontServer(t, front, owner)
	go func() {
		time.Sleep(300 * time.Millisecond)
		front.event(&pcluster.ClusterTopology{})
	}()
	resp, err := http.Post(srv.URL, "application/json", strings.NewReader(`{"jsonrpc":"2.0","id":"x","method":"ping"}`))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	got, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != http.StatusNotFound || !bytes.Contains(got, []byte(`"id":"x"`)) {
		t.Fatalf("status %d, body %s", resp.StatusCode, got)
	}
}

func TestForwardAnswers500WhenTheOwnersHandlerPanics(t *testing.T) {
	owner := testNode(t, http.HandlerFunc(func(http.ResponseWriter, *http.Request) { panic("boom") }))
	front := testNode(t, nil)
	knows(front, owner)
	srv := frontServer(t, front, owner)
	resp, err := http.Get(srv.URL)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusInternalServerError {
		t.Fatalf("status %d", resp.StatusCode)
	}
}

// BenchmarkForward is one JSON request carried to another node and its
// answer back, over two remotes on loopback: the tunnel's own cost, which
// bench/run's cluster part measures with troupe's sessions around it.
func BenchmarkForward(b *testing.B) {
	t := &testing.T{}
	owner := testNode(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write([]byte(`{"jsonrpc":"2.0","id":1,"result":{}}`))
	}))
	front := testNode(t, nil)
	knows(front, owner)
	body := []byte(`{"jsonrpc":"2.0","id":1,"method":"ping"}`)
	req := httptest.NewRequest(http.MethodPost, "/mcp", nil)
	b.ReportAllocs()
	b.ResetTimer()
	for b.Loop() {
		rec := httptest.NewRecorder()
		if err := front.Forward(rec, req, body, owner.self); err != nil || rec.Code != http.StatusOK {
			b.Fatal(err, rec.Code)
		}
	}
}
