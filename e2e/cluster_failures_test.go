package e2e

// Cluster e2e beyond plain routing: everything addressed to a session
// (GET streams, Last-Event-ID, DELETE, the client's answers to the
// session's own requests) through a node that does not own it; a node
// joining under load; a node killed with SIGKILL. The nodes run the
// binary built without -race (cluster_harness_test.go says why).

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// sseEvent is one server-sent event.
type sseEvent struct {
	id   string
	data map[string]any
}

// events reads the server-sent events of body, one at a time, on a
// goroutine the reader owns; the channel closes at the body's end.
func events(body io.Reader) <-chan sseEvent {
	ch := make(chan sseEvent, 64)
	go func() {
		defer close(ch)
		sc := bufio.NewScanner(body)
		sc.Buffer(make([]byte, 1<<20), 16<<20)
		var e sseEvent
		for sc.Scan() {
			line := sc.Text()
			switch {
			case line == "":
				if e.data != nil {
					ch <- e
				}
				e = sseEvent{}
			case strings.HasPrefix(line, "id: "):
				e.id = strings.TrimPrefix(line, "id: ")
			case strings.HasPrefix(line, "data: "):
				_ = json.Unmarshal([]byte(strings.TrimPrefix(line, "data: ")), &e.data)
			}
		}
	}()
	return ch
}

// next waits for the next event (false at the end or after timeout).
func next(t *testing.T, ch <-chan sseEvent, timeout time.Duration) (sseEvent, bool) {
	t.Helper()
	select {
	case e, ok := <-ch:
		return e, ok
	case <-time.After(timeout):
		t.Fatalf("no event within %v", timeout)
		return sseEvent{}, false
	}
}

// initializeAs opens a session on n with the client capabilities given.
func (n *clusterNode) initializeAs(t *testing.T, caps map[string]any) string {
	t.Helper()
	r := n.post(t, "", map[string]any{"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": map[string]any{
		"protocolVersion": "2025-06-18", "capabilities": caps,
		"clientInfo": map[string]any{"name": "cluster-e2e", "version": "1"}}})
	if r.status != http.StatusOK || r.sessionID == "" {
		t.Fatalf("initialize on %s: status %d, %v", n.http, r.status, r.messages)
	}
	if a := n.post(t, r.sessionID, map[string]any{"jsonrpc": "2.0", "method": "notifications/initialized"}); a.status != http.StatusAccepted {
		t.Fatalf("notifications/initialized on %s: status %d", n.http, a.status)
	}
	return r.sessionID
}

// callMsg is a tools/call request (with a progress token when token is
// not "").
func callMsg(id int, name, token string) map[string]any {
	params := map[string]any{"name": name, "arguments": map[string]any{}}
	if token != "" {
		params["_meta"] = map[string]any{"progressToken": token}
	}
	return map[string]any{"jsonrpc": "2.0", "id": id, "method": "tools/call", "params": params}
}

// status sends a request and returns its status and body (err when it
// was not answered).
func (n *clusterNode) status(method, sid string, body any) (int, string, error) {
	resp, err := n.send(method, sid, body)
	if err != nil {
		return 0, "", err
	}
	defer resp.Body.Close()
	if method == http.MethodGet && resp.StatusCode == http.StatusOK {
		return resp.StatusCode, "", nil // a stream: do not wait for its end
	}
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b), nil
}

const countTool = `
[mcp.count]
description = "Counts to five, one line at a time."
command = "sh"
args = ["-c", "for i in 1 2 3 4 5; do echo line $i; sleep 0.3; done"]
side_effects = []
requires_approval = false
streaming = true
`

// TestClusterSessionTrafficThroughOtherNodes: a session's GET stream, the
// resumption of a dropped answer by Last-Event-ID, the client's answer to
// an approval the session asked, and DELETE all work through nodes that
// do not own the session; after DELETE every node answers 404.
func TestClusterSessionTrafficThroughOtherNodes(t *testing.T) {
	c := newTestCluster(t, countTool+`
[mcp.guarded]
description = "Writes a marker, once a person approves."
command = "sh"
args = ["-c", "echo approved-run; echo ran > guarded.txt"]
side_effects = []
requires_approval = true
`)
	a, b, d := c.startNode(), c.startNode(), c.startNode()
	sid := a.initializeAs(t, map[string]any{"elicitation": map[string]any{}})

	// The standalone GET stream through b gets what the session sends
	// outside a POST's stream: the progress of a call whose client takes
	// only JSON (posted through d).
	get, err := b.send(http.MethodGet, sid, nil)
	if err != nil || get.StatusCode != http.StatusOK || get.Header.Get("Content-Type") != "text/event-stream" {
		t.Fatalf("GET stream through a non-owner: %v %v", err, get)
	}
	standalone := events(get.Body)
	resp, err := d.send(http.MethodPost, sid, callMsg(1, "count", "g1"), "Accept", "application/json")
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK || !strings.Contains(string(body), "line 5") {
		t.Fatalf("JSON-only call through d: %d %s", resp.StatusCode, body)
	}
	progress := 0
	for progress < 5 {
		e, ok := next(t, standalone, 10*time.Second)
		if !ok {
			t.Fatalf("the GET stream ended after %d progress notifications", progress)
		}
		if e.data["method"] != "notifications/progress" || e.id == "" {
			t.Fatalf("GET stream event %q %v", e.id, e.data)
		}
		progress++
	}

	// A streamed answer dropped after its first event on b is resumed
	// through d with Last-Event-ID: the rest of the events, response last.
	resp, err = b.send(http.MethodPost, sid, callMsg(2, "count", "r2"))
	if err != nil || resp.StatusCode != http.StatusOK || resp.Header.Get("Content-Type") != "text/event-stream" {
		t.Fatalf("streamed call through b: %v %v", err, resp)
	}
	first, ok := next(t, events(resp.Body), 10*time.Second)
	if !ok || first.id == "" || first.data["method"] != "notifications/progress" {
		t.Fatalf("first event of the streamed call: %q %v", first.id, first.data)
	}
	resp.Body.Close() // the connection drops: not a cancellation
	var resumed *http.Response
	deadline := time.Now().Add(10 * time.Second)
	for {
		resumed, err = d.send(http.MethodGet, sid, nil, "Last-Event-ID", first.id)
		if err != nil {
			t.Fatal(err)
		}
		if resumed.StatusCode != http.StatusConflict || time.Now().After(deadline) {
			break // 409 while the owner still serves the dropped POST
		}
		resumed.Body.Close()
		time.Sleep(50 * time.Millisecond)
	}
	if resumed.StatusCode != http.StatusOK {
		b, _ := io.ReadAll(resumed.Body)
		t.Fatalf("resume through d: %d %s", resumed.StatusCode, b)
	}
	var rest []sseEvent
	for e := range events(resumed.Body) {
		rest = append(rest, e)
	}
	resumed.Body.Close()
	if len(rest) == 0 || rest[len(rest)-1].data["id"] != float64(2) || !strings.Contains(fmt.Sprint(rest[len(rest)-1].data["result"]), "line 5") {
		t.Fatalf("resumed events: %v", rest)
	}
	prefix := first.id[:strings.LastIndexByte(first.id, '-')+1]
	n, _ := strconv.Atoi(first.id[len(prefix):])
	for i, e := range rest {
		if e.id != prefix+strconv.Itoa(n+1+i) {
			t.Fatalf("resumed event %d has id %q after %q", i, e.id, first.id)
		}
	}

	// An approval asked on the stream of a call posted through b is
	// answered through d; the tool runs once.
	resp, err = b.send(http.MethodPost, sid, callMsg(3, "guarded", ""))
	if err != nil || resp.StatusCode != http.StatusOK || resp.Header.Get("Content-Type") != "text/event-stream" {
		t.Fatalf("guarded call through b: %v %v", err, resp)
	}
	call := events(resp.Body)
	ask, ok := next(t, call, 10*time.Second)
	if !ok || ask.data["method"] != "elicitation/create" {
		t.Fatalf("guarded call: first event %v", ask.data)
	}
	status, text, err := d.status(http.MethodPost, sid, map[string]any{"jsonrpc": "2.0", "id": ask.data["id"],
		"result": map[string]any{"action": "accept", "content": map[string]any{"decision": "once"}}})
	if err != nil || status != http.StatusAccepted {
		t.Fatalf("the approval answered through d: %d %s %v", status, text, err)
	}
	var final sseEvent
	for e := range call {
		final = e
	}
	resp.Body.Close()
	result, _ := final.data["result"].(map[string]any)
	if final.data["id"] != float64(3) || result == nil || result["isError"] == true || !strings.Contains(fmt.Sprint(result), "approved-run") {
		t.Fatalf("guarded call's answer: %v", final.data)
	}
	if got, err := os.ReadFile(filepath.Join(c.workspace, "guarded.txt")); err != nil || string(got) != "ran\n" {
		t.Fatalf("the approved tool's marker: %q %v", got, err)
	}

	// DELETE through d ends the session: the GET stream on b ends, and
	// every node answers 404 for it.
	if status, text, err := d.status(http.MethodDelete, sid, nil); err != nil || status != http.StatusNoContent {
		t.Fatalf("DELETE through d: %d %s %v", status, text, err)
	}
	select {
	case _, open := <-standalone:
		for open {
			_, open = <-standalone
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the GET stream through b stayed open after DELETE")
	}
	get.Body.Close()
	for _, front := range []*clusterNode{a, b, d} {
		for _, m := range []string{http.MethodPost, http.MethodGet, http.MethodDelete} {
			var msg any
			if m == http.MethodPost {
				msg = map[string]any{"jsonrpc": "2.0", "id": 9, "method": "tools/list"}
			}
			if status, text, err := front.status(m, sid, msg); err != nil || status != http.StatusNotFound {
				t.Errorf("%s of the deleted session through %s: %d %s %v", m, front.http, status, text, err)
			}
		}
	}
}

const echoTool = `
[mcp.hello]
description = "Says hello."
command = "sh"
args = ["-c", "echo hello"]
side_effects = []
requires_approval = false
`

// callOK makes one tools/call of hello in sid through n, and returns an
// error unless it answered with the tool's output.
func (n *clusterNode) callOK(sid string, id int) error {
	resp, err := n.send(http.MethodPost, sid, callMsg(id, "hello", ""))
	if err != nil {
		return fmt.Errorf("through %s: %v", n.http, err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != http.StatusOK || !bytes.Contains(body, []byte("hello")) || bytes.Contains(body, []byte(`"isError":true`)) {
		return fmt.Errorf("through %s: %d %s", n.http, resp.StatusCode, body)
	}
	return nil
}

// TestClusterJoinUnderLoadFailsNoCall: callers keep calling a tool in
// sessions of both nodes of a two-node cluster, through both nodes; a
// third node joins meanwhile (and becomes a front too); no call fails.
func TestClusterJoinUnderLoadFailsNoCall(t *testing.T) {
	c := newTestCluster(t, echoTool)
	first, second := c.startNode(), c.startNode()
	var sessions []string
	for range 3 {
		sessions = append(sessions, first.initialize(t), second.initialize(t))
	}
	var fronts atomic.Pointer[[]*clusterNode]
	fronts.Store(&[]*clusterNode{first, second})

	var calls, failed atomic.Int64
	var mu sync.Mutex
	var failures []string
	stop := make(chan struct{})
	var wg sync.WaitGroup
	for w := range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; ; i++ {
				select {
				case <-stop:
					return
				default:
				}
				fs := *fronts.Load()
				front, sid := fs[(w+i)%len(fs)], sessions[(w*7+i)%len(sessions)]
				calls.Add(1)
				if err := front.callOK(sid, i+1); err != nil {
					failed.Add(1)
					mu.Lock()
					failures = append(failures, time.Now().Format("15:04:05.000")+" "+err.Error())
					mu.Unlock()
				}
			}
		}()
	}
	time.Sleep(2 * time.Second)
	before := calls.Load()
	joinStart := time.Now()
	third := c.startNode()
	joined := time.Since(joinStart)
	fronts.Store(&[]*clusterNode{first, second, third})
	during := calls.Load() - before
	time.Sleep(6 * time.Second)
	close(stop)
	wg.Wait()
	t.Logf("%d calls in all, %d while the third node joined (%v), %d failed", calls.Load(), during, joined.Round(time.Millisecond), failed.Load())
	if during == 0 {
		t.Fatal("no call ran while the third node joined")
	}
	if failed.Load() > 0 {
		t.Fatalf("%d of %d calls failed during the join:\n%s", failed.Load(), calls.Load(), strings.Join(failures, "\n"))
	}
	// The new node routes both nodes' sessions, and they route its own.
	own := third.initialize(t)
	for i, sid := range append(sessions, own) {
		for _, front := range []*clusterNode{first, second, third} {
			if err := front.callOK(sid, 1000+i); err != nil {
				t.Fatal(err)
			}
		}
	}
}

// nodeUsage is what a node process holds at one moment.
type nodeUsage struct {
	goroutines, fds, threads int
	children                 []int
	temp                     []string
}

// usage reads a node's goroutines (its /metrics), fds and threads (/proc),
// child processes, and the files under its TMPDIR.
func (n *clusterNode) usage(t *testing.T, tmp string) nodeUsage {
	t.Helper()
	cmd, _ := n.process()
	pid := cmd.Process.Pid
	var u nodeUsage
	req, _ := http.NewRequest(http.MethodGet, "http://"+n.http+"/metrics", nil)
	req.Header.Set("Authorization", "Bearer "+n.c.token)
	resp, err := clusterClient.Do(req)
	if err != nil {
		t.Fatalf("metrics of %s: %v", n.http, err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	for _, line := range strings.Split(string(body), "\n") {
		if v, ok := strings.CutPrefix(line, "go_goroutines "); ok {
			u.goroutines, _ = strconv.Atoi(strings.TrimSpace(v))
		}
	}
	if u.goroutines == 0 {
		t.Fatalf("no go_goroutines in %s's /metrics", n.http)
	}
	count := func(dir string) int {
		entries, err := os.ReadDir(dir)
		if err != nil {
			t.Fatal(err)
		}
		return len(entries)
	}
	u.fds = count(fmt.Sprintf("/proc/%d/fd", pid))
	u.threads = count(fmt.Sprintf("/proc/%d/task", pid))
	procs, _ := os.ReadDir("/proc")
	for _, p := range procs {
		stat, err := os.ReadFile(filepath.Join("/proc", p.Name(), "stat"))
		if err != nil {
			continue
		}
		// pid (comm) state ppid ...: comm may hold spaces, so cut at its end.
		fields := strings.Fields(string(stat[bytes.LastIndexByte(stat, ')')+1:]))
		if len(fields) > 1 && fields[1] == strconv.Itoa(pid) {
			child, _ := strconv.Atoi(p.Name())
			u.children = append(u.children, child)
		}
	}
	_ = filepath.WalkDir(tmp, func(path string, _ os.DirEntry, err error) error {
		if err == nil && path != tmp {
			u.temp = append(u.temp, strings.TrimPrefix(path, tmp))
		}
		return nil
	})
	return u
}

// TestClusterKilledNodeCostsOnlyItsSessions: kill -9 of one of three
// nodes. A streamed call of one of its sessions through a survivor ends
// with a JSON-RPC error naming the session; within 5 s every survivor
// answers 404 for its sessions; the survivors' own sessions keep working
// through both; and the survivors hold no more goroutines, fds, threads,
// child processes or temp files than before.
func TestClusterKilledNodeCostsOnlyItsSessions(t *testing.T) {
	c := newTestCluster(t, echoTool+`
[mcp.slow]
description = "Ticks for a while."
command = "sh"
args = ["-c", "for i in $(seq 1 25); do echo tick $i; sleep 0.2; done"]
side_effects = []
requires_approval = false
streaming = true
`)
	// Each node gets its own TMPDIR (the environment a node starts with),
	// so what a survivor leaves there is its own.
	var nodes []*clusterNode
	var tmps []string
	owned := map[*clusterNode][]string{}
	start := func() {
		tmp := t.TempDir()
		n := c.startNodeEnv([]string{"TMPDIR=" + tmp})
		nodes, tmps = append(nodes, n), append(tmps, tmp)
		owned[n] = []string{n.initialize(t), n.initialize(t)}
	}
	// warm uses every session through every node, so that every
	// connection between the nodes is open.
	warm := func() {
		for _, n := range nodes {
			for _, sid := range owned[n] {
				for _, front := range nodes {
					if err := front.callOK(sid, 1); err != nil {
						t.Fatal(err)
					}
				}
			}
		}
		time.Sleep(time.Second) // the runs' clean-up after their answers
	}
	// The baseline is the two survivors alone, connected to each other:
	// what they hold once the victim is gone again.
	start()
	start()
	survivors := nodes[:2]
	warm()
	var before []nodeUsage
	for i, n := range survivors {
		before = append(before, n.usage(t, tmps[i]))
	}
	start()
	victim := nodes[2]
	warm()
	var joined []nodeUsage
	for i, n := range survivors {
		joined = append(joined, n.usage(t, tmps[i]))
	}

	// A streamed call in a victim's session, through a survivor, in flight.
	lostSID := owned[victim][0]
	resp, err := survivors[0].send(http.MethodPost, lostSID, callMsg(3, "slow", "s3"))
	if err != nil || resp.StatusCode != http.StatusOK {
		t.Fatalf("streamed call through a survivor: %v %v", err, resp)
	}
	defer resp.Body.Close()
	inflight := events(resp.Body)
	if e, ok := next(t, inflight, 10*time.Second); !ok || e.data["method"] != "notifications/progress" {
		t.Fatalf("first event of the in-flight call: %v", e.data)
	}

	killed := time.Now()
	victim.kill9()

	// The in-flight call ends with an error naming the lost session.
	var last sseEvent
	for e := range inflight {
		last = e
	}
	streamEnded := time.Since(killed)
	errObj, _ := last.data["error"].(map[string]any)
	if last.data["id"] != float64(3) || errObj == nil || !strings.Contains(fmt.Sprint(errObj["message"]), lostSID[:8]) {
		t.Fatalf("the in-flight call's last event after the kill: %v", last.data)
	}

	// Every survivor answers 404 for each of the victim's sessions within 5 s.
	var wg sync.WaitGroup
	var mu sync.Mutex
	var took []time.Duration
	var problems []string
	for _, front := range survivors {
		for _, sid := range owned[victim] {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for {
					status, text, err := front.status(http.MethodPost, sid, map[string]any{"jsonrpc": "2.0", "id": 4, "method": "tools/list"})
					mu.Lock()
					switch {
					case status == http.StatusNotFound:
						took = append(took, time.Since(killed))
						mu.Unlock()
						return
					case time.Since(killed) > 5*time.Second:
						problems = append(problems, fmt.Sprintf("%s still answers %d %s %v for a lost session after 5 s", front.http, status, text, err))
						mu.Unlock()
						return
					}
					mu.Unlock()
					time.Sleep(20 * time.Millisecond)
				}
			}()
		}
	}
	wg.Wait()
	slices.Sort(took)
	t.Logf("the in-flight stream ended %v after the kill; the lost sessions answered 404 after %v", streamEnded.Round(time.Millisecond), took)
	if len(problems) > 0 {
		t.Fatal(strings.Join(problems, "\n"))
	}

	// The survivors' sessions work through both survivors.
	for _, owner := range survivors {
		for _, sid := range owned[owner] {
			for _, front := range survivors {
				if err := front.callOK(sid, 5); err != nil {
					t.Fatal(err)
				}
			}
		}
	}

	// Nothing is left behind on the survivors: their goroutines and fds
	// come back to what they held before the victim joined (within a
	// tolerance of 2 for the runtime's and the library's comings and
	// goings), so a leak of the size of a connection attempt to the dead
	// node (a gRPC ClientConn redialing it forever: about four goroutines
	// each) or of the in-flight call (its handler, its stream actor) shows.
	// They are polled for 15 s after the kill: the library tries a dead
	// address five times, two seconds apart, before it gives up. Then the
	// survivors' sessions end (DELETE) and their output files with them:
	// no temp file is left, and no child process.
	for i, n := range survivors {
		var now nodeUsage
		for {
			now = n.usage(t, tmps[i])
			if now.goroutines <= before[i].goroutines+2 && now.fds <= before[i].fds+2 || time.Since(killed) > 15*time.Second {
				break
			}
			time.Sleep(200 * time.Millisecond)
		}
		for _, sid := range owned[n] {
			if status, text, err := survivors[1-i].status(http.MethodDelete, sid, nil); err != nil || status != http.StatusNoContent {
				t.Fatalf("DELETE of a survivor's session: %d %s %v", status, text, err)
			}
		}
		end := n.usage(t, tmps[i])
		var files []string
		for _, f := range end.temp {
			if info, err := os.Stat(filepath.Join(tmps[i], f)); err == nil && !info.IsDir() {
				files = append(files, f)
			}
		}
		t.Logf("survivor %s: goroutines %d (two nodes) → %d (three) → %d (after the kill), fds %d → %d → %d, threads %d → %d → %d, children %v; after its sessions ended: temp files %v",
			n.http, before[i].goroutines, joined[i].goroutines, now.goroutines, before[i].fds, joined[i].fds, now.fds,
			before[i].threads, joined[i].threads, now.threads, now.children, files)
		if now.goroutines > before[i].goroutines+2 || now.fds > before[i].fds+2 {
			t.Errorf("survivor %s kept goroutines (%d → %d) or fds (%d → %d) after the victim's loss",
				n.http, before[i].goroutines, now.goroutines, before[i].fds, now.fds)
		}
		if len(now.children) > 0 || len(end.children) > 0 {
			t.Errorf("survivor %s has child processes %v", n.http, now.children)
		}
		if len(files) > 0 {
			t.Errorf("survivor %s left temp files %v", n.http, files)
		}
	}
}
