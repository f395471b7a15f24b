package e2e

import (
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// Raw JSON-RPC in protocol revision 2026-07-28 (no initialize, version and
// capabilities in each request's _meta) against the real binary, over
// stdio and HTTP, beside a handshake session on the same process/endpoint.

const modernMetaJSON = `"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28",` +
	`"io.modelcontextprotocol/clientCapabilities":{"elicitation":{"form":{}}},"io.modelcontextprotocol/clientInfo":{"name":"e2e-modern","version":"1"}}`

func modernRequest(id, method, params string) string {
	if params != "" {
		params += ","
	}
	return `{"jsonrpc":"2.0","id":` + id + `,"method":"` + method + `","params":{` + params + modernMetaJSON + `}}`
}

// checkModernResult fails unless m is a 2026-07-28 result: resultType and
// the server's identity in _meta.
func checkModernResult(t *testing.T, what string, m map[string]any) map[string]any {
	t.Helper()
	res, ok := m["result"].(map[string]any)
	if !ok {
		t.Fatalf("%s: want a result, got %v", what, m)
	}
	meta, _ := res["_meta"].(map[string]any)
	info, _ := meta["io.modelcontextprotocol/serverInfo"].(map[string]any)
	if res["resultType"] != "complete" || info["name"] != "troupe" {
		t.Fatalf("%s: result without resultType or serverInfo: %v", what, res)
	}
	return res
}

func sortedToolNames(t *testing.T, res map[string]any) []string {
	t.Helper()
	list, _ := res["tools"].([]any)
	var names []string
	for _, x := range list {
		names = append(names, x.(map[string]any)["name"].(string))
	}
	if len(names) == 0 || !sort.StringsAreSorted(names) {
		t.Fatalf("tools/list not in a deterministic (sorted) order: %v", names)
	}
	return names
}

// inputRequiredState checks m is an input_required result asking for
// approval with elicitation/create (offering "session" or not) and returns
// its requestState.
func inputRequiredState(t *testing.T, m map[string]any, session bool) string {
	t.Helper()
	res, _ := m["result"].(map[string]any)
	reqs, _ := res["inputRequests"].(map[string]any)
	approval, _ := reqs["approval"].(map[string]any)
	state, _ := res["requestState"].(string)
	form, _ := json.Marshal(approval["params"])
	if res["resultType"] != "input_required" || approval["method"] != "elicitation/create" || state == "" ||
		!strings.Contains(string(form), `"once"`) || strings.Contains(string(form), `"session"`) != session {
		t.Fatalf("want input_required asking for approval (session offered: %v): %v", session, m)
	}
	return state
}

// mrtrRetry is the retry's params: the state and the person's decision.
func mrtrRetry(state, decision string) string {
	return `,"requestState":"` + state + `","inputResponses":{"approval":{"action":"accept","content":{"decision":"` + decision + `"}}}`
}

func TestStatelessRevisionOverStdio(t *testing.T) {
	fx := newFixture(t)
	s := startServer(t, fx.dir)

	s.send(modernRequest(`"d"`, "server/discover", ""))
	res := checkModernResult(t, "server/discover", s.recv())
	if v, _ := res["supportedVersions"].([]any); len(v) == 0 || v[0] != "2026-07-28" || res["cacheScope"] == nil || res["ttlMs"] == nil {
		t.Fatalf("server/discover: %v", res)
	}

	s.send(modernRequest("1", "tools/list", ""))
	sortedToolNames(t, checkModernResult(t, "tools/list", s.recv()))

	s.send(modernRequest("2", "tools/call", `"name":"repo.readFile","arguments":{"path":"README.md"}`))
	m := s.recv()
	checkModernResult(t, "tools/call", m)
	if !strings.Contains(resultText(t, m), "A workspace for troupe") {
		t.Fatalf("repo.readFile: %v", m)
	}

	// A call that needs approval is asked through MRTR: input_required with
	// the approval form and a sealed state; nothing runs until the retry
	// approves, a tampered or replayed state runs nothing, "deny" runs
	// nothing, and a client without elicitation gets -32021.
	marker := filepath.Join(fx.dir, "modern-marker")
	call := `"name":"shell.exec","arguments":{"command":["touch","modern-marker"]}`
	noMarker := func(what string) {
		t.Helper()
		if _, err := os.Stat(marker); !os.IsNotExist(err) {
			t.Fatalf("%s: the call ran: %v", what, err)
		}
	}
	s.send(modernRequest("3", "tools/call", call))
	state := inputRequiredState(t, s.recv(), true)
	noMarker("input_required")
	tampered := []byte(state)
	tampered[len(tampered)/2] ^= 1
	s.send(modernRequest("3", "tools/call", call+mrtrRetry(string(tampered), "once")))
	assertStateRefused(t, s.recv(), "requestState")
	noMarker("tampered state")
	s.send(modernRequest("3", "tools/call", call+mrtrRetry(state, "deny")))
	assertToolError(t, s.recv(), "shell.exec")
	noMarker("deny")
	s.send(modernRequest("3", "tools/call", call))
	state = inputRequiredState(t, s.recv(), true)
	s.send(modernRequest("3", "tools/call", call+mrtrRetry(state, "once")))
	checkModernResult(t, "approved tools/call", s.recv())
	if _, err := os.Stat(marker); err != nil {
		t.Fatalf("the approved call did not run: %v", err)
	}
	if err := os.Remove(marker); err != nil {
		t.Fatal(err)
	}
	s.send(modernRequest("3", "tools/call", call+mrtrRetry(state, "once")))
	assertStateRefused(t, s.recv(), "already used")
	noMarker("replayed state")
	s.send(strings.Replace(modernRequest("3", "tools/call", call), `{"elicitation":{"form":{}}}`, `{}`, 1))
	if code, _ := errorCode(t, s.recv()); code != -32021 {
		t.Fatalf("without elicitation: code %v", code)
	}
	noMarker("without elicitation")

	for _, tc := range []struct {
		line string
		code float64
	}{
		{`{"jsonrpc":"2.0","id":4,"method":"tools/list","params":{"_meta":{"io.modelcontextprotocol/protocolVersion":"1900-01-01","io.modelcontextprotocol/clientCapabilities":{}}}}`, -32022},
		{`{"jsonrpc":"2.0","id":4,"method":"tools/list","params":{"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28"}}}`, -32602},
		{`{"jsonrpc":"2.0","id":4,"method":"server/discover"}`, -32602},
		{modernRequest("4", "ping", ""), -32601},
		{modernRequest("4", "logging/setLevel", `"level":"debug"`), -32601},
		{modernRequest("4", "no/such", ""), -32601},
		// 2026-07-28 retired -32002: an unknown output is invalid params.
		{modernRequest("4", "resources/read", `"uri":"troupe://output/nope/stdout"`), -32602},
	} {
		s.send(tc.line)
		if code, id := errorCode(t, s.recv()); code != tc.code || id != float64(4) {
			t.Errorf("%s: code %v id %v, want %v", tc.line, code, id, tc.code)
		}
	}

	// The same process then serves a handshake session.
	s.initialize("2025-11-25")
	s.send(`{"jsonrpc":"2.0","id":5,"method":"ping"}`)
	if m := s.recv(); m["error"] != nil {
		t.Fatalf("legacy ping after modern requests: %v", m)
	}
	s.send(`{"jsonrpc":"2.0","id":6,"method":"tools/call","params":{"name":"repo.readFile","arguments":{"path":"README.md"}}}`)
	m = s.recv()
	if r, _ := m["result"].(map[string]any); r == nil || r["resultType"] != nil {
		t.Fatalf("legacy call: %v", m)
	}
	// ... and per-request clients still, beside it.
	s.send(modernRequest("7", "tools/list", ""))
	checkModernResult(t, "tools/list after initialize", s.recv())
}

func TestStatelessRevisionOverHTTP(t *testing.T) {
	fx := newFixture(t)
	srv := startHTTPServer(t, fx.dir, "")
	post := func(body string, headers map[string]string) (int, http.Header, map[string]any) {
		t.Helper()
		h := map[string]string{"Content-Type": "application/json", "Accept": "application/json, text/event-stream",
			"MCP-Protocol-Version": "2026-07-28"}
		for k, v := range headers {
			h[k] = v
		}
		resp := srv.request(t, http.MethodPost, strings.NewReader(body), h)
		defer resp.Body.Close()
		b, err := io.ReadAll(resp.Body)
		if err != nil {
			t.Fatal(err)
		}
		var m map[string]any
		if err := json.Unmarshal(b, &m); err != nil {
			t.Fatalf("answer is not JSON: %d %q", resp.StatusCode, b)
		}
		return resp.StatusCode, resp.Header, m
	}

	status, hdr, m := post(modernRequest("1", "server/discover", ""), map[string]string{"Mcp-Method": "server/discover"})
	if status != 200 || hdr.Get("Mcp-Session-Id") != "" {
		t.Fatalf("discover: %d %v %v", status, hdr, m)
	}
	checkModernResult(t, "server/discover", m)

	_, _, m = post(modernRequest("2", "tools/list", ""), map[string]string{"Mcp-Method": "tools/list"})
	sortedToolNames(t, checkModernResult(t, "tools/list", m))

	status, _, m = post(modernRequest("3", "tools/call", `"name":"repo.readFile","arguments":{"path":"README.md"}`),
		map[string]string{"Mcp-Method": "tools/call", "Mcp-Name": "repo.readFile"})
	checkModernResult(t, "tools/call", m)
	if status != 200 || !strings.Contains(resultText(t, m), "A workspace for troupe") {
		t.Fatalf("repo.readFile: %d %v", status, m)
	}

	status, _, m = post(modernRequest("4", "tools/call", `"name":"repo.readFile","arguments":{"path":"README.md"}`),
		map[string]string{"Mcp-Method": "tools/call", "Mcp-Name": "repo.listDir"})
	if code, _ := errorCode(t, m); status != 400 || code != -32020 {
		t.Fatalf("header mismatch: %d %v", status, m)
	}
	status, _, m = post(modernRequest("5", "no/such", ""), map[string]string{"Mcp-Method": "no/such"})
	if code, _ := errorCode(t, m); status != 404 || code != -32601 {
		t.Fatalf("unknown method: %d %v", status, m)
	}
	status, _, m = post(`{"jsonrpc":"2.0","id":6,"method":"tools/list","params":{"_meta":{"io.modelcontextprotocol/protocolVersion":"1900-01-01","io.modelcontextprotocol/clientCapabilities":{}}}}`,
		map[string]string{"Mcp-Method": "tools/list", "MCP-Protocol-Version": "1900-01-01"})
	if code, _ := errorCode(t, m); status != 400 || code != -32022 {
		t.Fatalf("unsupported version: %d %v", status, m)
	}

	// Approval through MRTR: once and deny only over HTTP; the approved
	// retry runs, the replay and "deny" do not, and no elicitation is 400
	// with -32021.
	marker := filepath.Join(fx.dir, "modern-http-marker")
	call := `"name":"shell.exec","arguments":{"command":["touch","modern-http-marker"]}`
	callHeaders := map[string]string{"Mcp-Method": "tools/call", "Mcp-Name": "shell.exec"}
	_, _, m = post(modernRequest("7", "tools/call", call), callHeaders)
	state := inputRequiredState(t, m, false)
	_, _, m = post(modernRequest("7", "tools/call", call+mrtrRetry(state, "deny")), callHeaders)
	assertToolError(t, m, "shell.exec")
	if _, err := os.Stat(marker); !os.IsNotExist(err) {
		t.Fatalf("the denied call ran: %v", err)
	}
	_, _, m = post(modernRequest("7", "tools/call", call), callHeaders)
	state = inputRequiredState(t, m, false)
	_, _, m = post(modernRequest("7", "tools/call", call+mrtrRetry(state, "once")), callHeaders)
	checkModernResult(t, "approved tools/call", m)
	if err := os.Remove(marker); err != nil {
		t.Fatalf("the approved call did not run: %v", err)
	}
	_, _, m = post(modernRequest("7", "tools/call", call+mrtrRetry(state, "once")), callHeaders)
	assertStateRefused(t, m, "already used")
	status, _, m = post(strings.Replace(modernRequest("7", "tools/call", call), `{"elicitation":{"form":{}}}`, `{}`, 1), callHeaders)
	if code, _ := errorCode(t, m); status != 400 || code != -32021 {
		t.Fatalf("without elicitation: %d %v", status, m)
	}
	if _, err := os.Stat(marker); !os.IsNotExist(err) {
		t.Fatalf("a refused call ran: %v", err)
	}

	// A handshake session on the same endpoint afterwards.
	resp, body := postInitialize(t, srv, "")
	if resp.StatusCode != 200 || resp.Header.Get("Mcp-Session-Id") == "" {
		t.Fatalf("initialize after modern requests: %d %s", resp.StatusCode, body)
	}
}

// assertStateRefused checks a retry whose requestState failed verification
// was refused as invalid params (-32602) naming why.
func assertStateRefused(t *testing.T, m map[string]any, why string) {
	t.Helper()
	if code, _ := errorCode(t, m); code != -32602 || !strings.Contains(fmt.Sprint(m["error"]), why) {
		t.Fatalf("want -32602 naming %q, got %v", why, m)
	}
}

// One caller cannot block another's approvals (issue 23): one process
// serves HTTP, where caller A is its bearer credential, and stdio, where
// caller B is the connection; both share the process's memory of approval
// states. A's share is cut to 4 (approvals.max_states_per_caller) to keep
// the test short. A floods retries that carry only a requestState, each
// with the state the last one got (the attack as filed: each used to
// spend one state and mint another, until every caller's approvals were
// refused); B's approval still runs, and A was asked again under the same
// state every time. A then fills its share with new calls and is refused
// alone, -32000 naming its own limit, also after denying its states to
// churn them; B goes on.
func TestOneCallerCannotBlockAnothersApprovals(t *testing.T) {
	fx := newFixture(t)
	port, err := freePort()
	if err != nil {
		t.Fatal(err)
	}
	addr := net.JoinHostPort("127.0.0.1", strconv.Itoa(port))
	token := newToken(t)
	cmd := exec.Command(troupeBinary(t), "serve", "--workspace", fx.dir, "--http", addr, "--stdio",
		"--bearer-token-env", tokenEnv, "--log-level", "debug", "-c", "approvals.max_states_per_caller=4")
	cmd.Env = append(withoutVar(os.Environ(), tokenEnv), tokenEnv+"="+token)
	b := startPeer(t, cmd, false)
	t.Cleanup(func() { // runs before startPeer's: with stdin closed, HTTP goes on until a signal
		b.stdin.Close()
		_ = cmd.Process.Signal(syscall.SIGTERM)
	})
	a := &httpServer{base: "http://" + addr, url: "http://" + addr + "/mcp", token: token}
	for deadline := time.Now().Add(httpStartTimeout); !strings.Contains(b.errw.String(), "serving MCP over HTTP url="+a.url) || !a.healthy(); {
		if time.Now().After(deadline) {
			t.Fatalf("troupe did not serve HTTP; its log:\n%s", b.errw)
		}
		time.Sleep(25 * time.Millisecond)
	}
	post := func(body string) map[string]any {
		t.Helper()
		resp := a.request(t, http.MethodPost, strings.NewReader(body), map[string]string{"Content-Type": "application/json",
			"Accept": "application/json, text/event-stream", "MCP-Protocol-Version": "2026-07-28",
			"Mcp-Method": "tools/call", "Mcp-Name": "shell.exec"})
		defer resp.Body.Close()
		raw, err := io.ReadAll(resp.Body)
		var m map[string]any
		if err != nil || json.Unmarshal(raw, &m) != nil {
			t.Fatalf("answer is not JSON: %d %q %v", resp.StatusCode, raw, err)
		}
		return m
	}
	callA := `"name":"shell.exec","arguments":{"command":["touch","a-marker"]}`
	callB := `"name":"shell.exec","arguments":{"command":["touch","b-marker"]}`
	markerB := filepath.Join(fx.dir, "b-marker")
	approveB := func(id string) {
		t.Helper()
		b.send(modernRequest(id, "tools/call", callB))
		st := inputRequiredState(t, b.recv(), true)
		b.send(modernRequest(id, "tools/call", callB+mrtrRetry(st, "once")))
		checkModernResult(t, "caller B's approved call", b.recv())
		if err := os.Remove(markerB); err != nil {
			t.Fatalf("caller B's approved call did not run: %v", err)
		}
	}

	first := inputRequiredState(t, post(modernRequest("1", "tools/call", callA)), false)
	state, fresh := first, 0
	for i := range 16 {
		m := post(modernRequest(strconv.Itoa(10+i), "tools/call", callA+`,"requestState":"`+state+`"`))
		res, _ := m["result"].(map[string]any)
		next, _ := res["requestState"].(string)
		if next == "" {
			t.Logf("answer-less retry %d of caller A: %v", i, m)
			continue
		}
		if next != state {
			fresh++
		}
		state = next
	}
	approveB("1")
	if fresh > 0 || state != first {
		t.Fatalf("caller A's answer-less retries got %d fresh states, want the same state asked again", fresh)
	}

	states := []string{first}
	for i := range 3 {
		states = append(states, inputRequiredState(t, post(modernRequest(strconv.Itoa(40+i), "tools/call", callA)), false))
	}
	refusedAlone := func(what string) {
		t.Helper()
		m := post(modernRequest("50", "tools/call", callA))
		e, _ := m["error"].(map[string]any)
		data, _ := e["data"].(map[string]any)
		if code, _ := errorCode(t, m); code != -32000 || !strings.Contains(fmt.Sprint(e["message"]), "this caller") ||
			data["scope"] != "caller" || data["limit"] != float64(4) {
			t.Fatalf("%s: want -32000 naming caller A's own limit, got %v", what, m)
		}
	}
	refusedAlone("caller A past its share")
	approveB("2")
	for i, st := range states {
		assertToolError(t, post(modernRequest(strconv.Itoa(60+i), "tools/call", callA+mrtrRetry(st, "deny"))), "shell.exec")
		refusedAlone("caller A after denying its own state")
	}
	approveB("3")
	if _, err := os.Stat(filepath.Join(fx.dir, "a-marker")); !os.IsNotExist(err) {
		t.Fatalf("a call of caller A ran: %v", err)
	}
}
