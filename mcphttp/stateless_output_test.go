package mcphttp

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"strings"
	"testing"
	"time"

	"troupe/actors"
	"troupe/protocol"
	"troupe/spool"
	"troupe/tools"
)

// loudTool writes n bytes to its stdout, more than a result shows. It
// previews its calls, as tools that run programs do: those get a spool.
func loudTool(n int) tools.Tool {
	return previewing{funcTool{name: "loud", call: func(_ context.Context, req *tools.Request) (*protocol.CallToolResult, error) {
		for i := 0; i < n; i += 10 {
			fmt.Fprintf(req.Output.Stdout, "%09d\n", i)
		}
		return textResult(req.Output.Stdout.Text()), nil
	}}}
}

// previewing makes a test tool a Previewer (a program-running tool).
type previewing struct{ funcTool }

func (previewing) Preview(*tools.Request) (*tools.Preview, error) {
	return &tools.Preview{Cwd: "."}, nil
}

// outputRig serves loudTool with a small inline view, a spool directory
// and a server budget the test can look at.
func outputRig(t *testing.T, idle time.Duration) (*rig, string, *spool.Budget) {
	t.Helper()
	dir, budget := t.TempDir(), spool.NewBudget(0)
	r := newRig(t, rigConfig{tools: []tools.Tool{loudTool(50_000)}, opts: Options{BearerToken: "alpha"},
		http:    actors.HTTPOptions{IdleTimeout: idle},
		session: actors.SessionOptions{SpoolDir: dir, Spool: spool.Limits{InlineBytes: 512, Shared: budget}}})
	r.token = "alpha"
	return r, dir, budget
}

// modernLoudCall makes a 2026-07-28 tools/call of loud and returns the
// resource_link of its stdout.
func modernLoudCall(t *testing.T, r *rig, id int) string {
	t.Helper()
	body := fmt.Sprintf(`{"jsonrpc":"2.0","id":%d,"method":"tools/call","params":{"name":"loud","arguments":{},%s}}`,
		id, modernMeta("2026-07-28", ""))
	resp, b := r.post("", body, modernHeaders("tools/call", "loud")...)
	m := decode(t, b)
	var res protocol.CallToolResult
	if resp.StatusCode != http.StatusOK || m.Error != nil || json.Unmarshal(m.Result, &res) != nil {
		t.Fatalf("tools/call: %d %s", resp.StatusCode, b)
	}
	for _, c := range res.Content {
		if c.Type == "resource_link" && strings.HasPrefix(c.URI, spool.URIPrefix) {
			return c.URI
		}
	}
	t.Fatalf("no resource_link in %s", b)
	return ""
}

// modernRead reads uri with a 2026-07-28 resources/read.
func modernRead(t *testing.T, r *rig, id int, uri string) (status int, m rpcMessage, body []byte) {
	t.Helper()
	b := fmt.Sprintf(`{"jsonrpc":"2.0","id":%d,"method":"resources/read","params":{"uri":%q,%s}}`,
		id, uri, modernMeta("2026-07-28", ""))
	resp, body := r.post("", b, modernHeaders("resources/read", uri)...)
	return resp.StatusCode, decode(t, body), body
}

// readText is the text of a successful resources/read.
func readText(t *testing.T, m rpcMessage, body []byte) string {
	t.Helper()
	var rr protocol.ReadResourceResult
	if m.Error != nil || json.Unmarshal(m.Result, &rr) != nil || len(rr.Contents) != 1 || rr.Contents[0].Text == nil {
		t.Fatalf("resources/read: %s", body)
	}
	return *rr.Contents[0].Text
}

// spoolDirs lists what the spool directory holds (the stores' directories).
func spoolDirs(t *testing.T, dir string) []string {
	t.Helper()
	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, e := range entries {
		names = append(names, e.Name())
	}
	return names
}

// The output a 2026-07-28 call's result links to outlives the request's
// hidden session: the same credential reads it in a later request, another
// credential gets the "not found" of an unknown resource, and it is
// charged to the server's budget and removed when the Host closes.
func TestModernOutputLinkIsReadableByItsCaller(t *testing.T) {
	r, dir, budget := outputRig(t, 0)
	uri := modernLoudCall(t, r, 1)
	waitFor(t, 5*time.Second, "the call's hidden session to end", r.h.idle)

	status, m, body := modernRead(t, r, 2, uri+"?length=20")
	if got := readText(t, m, body); status != http.StatusOK || got != "000000000\n000000010\n" {
		t.Fatalf("the caller's read: %d %q", status, got)
	}
	// A second call of the same caller goes into the same store.
	uri2 := modernLoudCall(t, r, 3)
	if _, m, body := modernRead(t, r, 4, uri2); !strings.HasPrefix(readText(t, m, body), "000000000\n") {
		t.Fatalf("the second call's output: %s", body)
	}
	if len(spoolDirs(t, dir)) != 1 || budget.Used() == 0 {
		t.Fatalf("one caller, one store charged to the server's budget: %v, %d bytes", spoolDirs(t, dir), budget.Used())
	}

	// Another credential: the answer of an unknown resource, nothing more.
	r.h.SetAuth(namedTokens("another", "beta"))
	r.token = "beta"
	_, foreign, fb := modernRead(t, r, 5, uri)
	unknownURI := spool.URIPrefix + "c-000000000000/stdout"
	_, unknown, ub := modernRead(t, r, 6, unknownURI)
	if foreign.Error == nil || unknown.Error == nil || foreign.Error.Code != unknown.Error.Code ||
		strings.ReplaceAll(foreign.Error.Message, uri, "<uri>") != strings.ReplaceAll(unknown.Error.Message, unknownURI, "<uri>") {
		t.Fatalf("another credential's read:\n%s\nan unknown resource:\n%s", fb, ub)
	}
	if strings.Contains(string(fb), "000000000") {
		t.Fatalf("another credential read the output: %s", fb)
	}
	r.h.SetBearerToken("alpha")
	r.token = "alpha"
	if _, m, body := modernRead(t, r, 7, uri+"?length=10"); readText(t, m, body) != "000000000\n" {
		t.Fatalf("the caller's read after the other's: %s", body)
	}

	r.close()
	if left := spoolDirs(t, dir); len(left) != 0 || budget.Used() != 0 {
		t.Fatalf("after Close: %v left, %d bytes charged", left, budget.Used())
	}
}

// A caller's output goes once nobody has used it for
// http.session_idle_timeout; a read then gets "not found".
func TestModernOutputExpiresWhenIdle(t *testing.T) {
	r, dir, budget := outputRig(t, time.Second)
	uri := modernLoudCall(t, r, 1)
	if len(spoolDirs(t, dir)) != 1 {
		t.Fatalf("no store after the call: %v", spoolDirs(t, dir))
	}
	waitFor(t, 10*time.Second, "the idle store to be removed", func() bool {
		return len(spoolDirs(t, dir)) == 0 && budget.Used() == 0
	})
	if _, m, body := modernRead(t, r, 2, uri); m.Error == nil || m.Error.Code != protocol.CodeInvalidParams ||
		!strings.Contains(m.Error.Message, "not found") {
		t.Fatalf("a read after expiry: %s", body)
	}
}
