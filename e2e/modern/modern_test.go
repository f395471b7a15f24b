package modern

import (
	"encoding/json"
	"errors"
	"net/http"
	"slices"
	"strings"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
)

// troupeTools are tools every troupe serves with its default configuration.
var troupeTools = []string{"fs.writeFile", "repo.listDir", "repo.readFile", "repo.ripgrep", "shell.exec"}

// Both clients settle on 2026-07-28 through server/discover, never through
// initialize. The go-sdk client falls back to initialize silently when
// discover fails, so the version is what proves it, and the wire shows the
// DiscoverResult troupe sent.
func TestDiscover(t *testing.T) {
	forEachClient(t, func(t *testing.T, fx fixture, tg *target, ck clientKind) {
		s, rec := connectModern(t, tg, ck)
		if name := s.ServerName(); name != "troupe" {
			t.Errorf("server name %q, want troupe", name)
		}
		if init := rec.all("initialize"); len(init) != 0 {
			t.Errorf("the client sent initialize: %s", describe(init))
		}
		ex := rec.last("server/discover")
		if ex == nil {
			t.Fatal("no server/discover on the wire")
		}
		res, rerr := ex.result()
		if rerr != nil {
			t.Fatalf("server/discover: error %+v", rerr)
		}
		checkComplete(t, "server/discover", res, true)
		versions, _ := res["supportedVersions"].([]any)
		for _, want := range []string{modernVersion, legacyVersion} {
			if !slices.Contains(versions, any(want)) {
				t.Errorf("supportedVersions %v lacks %s", versions, want)
			}
		}
		if caps, _ := res["capabilities"].(map[string]any); caps["tools"] == nil {
			t.Errorf("capabilities %v do not offer tools", res["capabilities"])
		}
		checkHTTP(t, ex, http.StatusOK)
	})
}

// tools/list lists troupe's tools, each result complete with caching hints,
// in the same order every time (two fresh clients: a client may serve the
// second list from its cache).
func TestToolsList(t *testing.T) {
	forEachClient(t, func(t *testing.T, fx fixture, tg *target, ck clientKind) {
		var lists [2][]string
		for i := range lists {
			s, rec := connectModern(t, tg, ck)
			names, err := s.ListTools(ctxFor(t))
			if err != nil {
				t.Fatalf("tools/list: %v", err)
			}
			lists[i] = names
			ex := rec.last("tools/list")
			if ex == nil {
				t.Fatal("no tools/list on the wire")
			}
			res, rerr := ex.result()
			if rerr != nil {
				t.Fatalf("tools/list: error %+v", rerr)
			}
			checkComplete(t, "tools/list", res, true)
			checkHTTP(t, ex, http.StatusOK)
		}
		for _, want := range troupeTools {
			if !slices.Contains(lists[0], want) {
				t.Errorf("tools/list %v lacks %s", lists[0], want)
			}
		}
		if !slices.Equal(lists[0], lists[1]) {
			t.Errorf("tools/list changed order between requests:\n%v\n%v", lists[0], lists[1])
		}
	})
}

// repo.readFile returns the file, as a complete result.
func TestReadFile(t *testing.T) {
	forEachClient(t, func(t *testing.T, fx fixture, tg *target, ck clientKind) {
		s, rec := connectModern(t, tg, ck)
		res, err := s.CallTool(ctxFor(t), "repo.readFile", map[string]any{"path": "README.md"}, nil)
		if err != nil {
			t.Fatalf("repo.readFile: %v", err)
		}
		if res.IsError || readFileContent(res.Text) != fx.readme {
			t.Fatalf("repo.readFile: isError %v, text %q; want README.md's content", res.IsError, res.Text)
		}
		ex := rec.last("tools/call")
		wire, rerr := ex.result()
		if rerr != nil {
			t.Fatalf("tools/call: error %+v", rerr)
		}
		checkComplete(t, "tools/call", wire, false)
		checkHTTP(t, ex, http.StatusOK)
	})
}

// A client asking for a revision troupe does not implement gets -32022 with
// the revisions troupe does (HTTP: 400), and renegotiates: both clients
// retry with 2026-07-28 only when the error names it, else the go-sdk one
// falls back to initialize.
func TestUnsupportedVersionAtDiscover(t *testing.T) {
	forEachClient(t, func(t *testing.T, fx fixture, tg *target, ck clientKind) {
		s, rec := mustConnect(t, tg, ck, connectOptions{version: futureVersion})
		if v := s.Version(); v != modernVersion {
			t.Fatalf("negotiated version %q, want %q after -32022 (exchanges: %s)", v, modernVersion, describe(rec.all("")))
		}
		discovers := rec.all("server/discover")
		if len(discovers) != 2 {
			t.Fatalf("%d server/discover requests, want 2 (%s then %s): %s", len(discovers), futureVersion, modernVersion, describe(discovers))
		}
		checkUnsupported(t, discovers[0])
		if _, rerr := discovers[1].result(); rerr != nil {
			t.Errorf("server/discover at %s: error %+v", modernVersion, rerr)
		}
	})
}

// A tools/call declaring an unsupported revision in its _meta is refused
// with -32022 and nothing else happens. Only the go-sdk client lets a
// caller set the version of one request (mcp-go rewrites _meta itself).
func TestUnsupportedVersionOnCall(t *testing.T) {
	forEachTransport(t, func(t *testing.T, fx fixture, tg *target) {
		s, rec := connectModern(t, tg, clients[0])
		_, err := s.CallTool(ctxFor(t), "repo.readFile", map[string]any{"path": "README.md"},
			map[string]any{"io.modelcontextprotocol/protocolVersion": futureVersion})
		var werr *jsonrpc.Error
		if !errors.As(err, &werr) || werr.Code != -32022 {
			t.Fatalf("tools/call at %s: err %v, want a -32022 error", futureVersion, err)
		}
		ex := rec.last("tools/call")
		if tg.http != nil && ex.ReqHeader.Get("MCP-Protocol-Version") != futureVersion {
			t.Fatalf("the client sent MCP-Protocol-Version %q, want %q", ex.ReqHeader.Get("MCP-Protocol-Version"), futureVersion)
		}
		checkUnsupported(t, ex)
	})
}

// A client that did not declare elicitation cannot approve shell.exec: it
// gets -32021 naming the capability (HTTP: 400) or troupe's refusal, and
// nothing runs.
func TestMissingCapability(t *testing.T) {
	forEachClient(t, func(t *testing.T, fx fixture, tg *target, ck clientKind) {
		s, rec := connectModern(t, tg, ck)
		res, err := s.CallTool(ctxFor(t), "shell.exec",
			map[string]any{"command": []string{"sh", "-c", "echo ran > ran.txt"}}, nil)
		if exists(fx.dir, "ran.txt") {
			t.Fatal("shell.exec ran for a client that cannot approve it")
		}
		ex := rec.last("tools/call")
		if ex == nil || ex.Response == nil {
			t.Fatalf("no answer to tools/call on the wire (client error: %v)", err)
		}
		wire, rerr := ex.result()
		switch {
		case rerr != nil:
			if err == nil {
				t.Errorf("the client accepted an error answer: %s", ex.Response)
			}
			if rerr.Code != -32021 {
				t.Fatalf("tools/call: error %+v, want -32021", rerr)
			}
			var data struct {
				RequiredCapabilities map[string]any `json:"requiredCapabilities"`
			}
			if json.Unmarshal(rerr.Data, &data) != nil || data.RequiredCapabilities["elicitation"] == nil {
				t.Errorf("-32021 data %s does not name elicitation in requiredCapabilities", rerr.Data)
			}
			checkHTTP(t, ex, http.StatusBadRequest)
			t.Logf("troupe refused with %d: %s", rerr.Code, rerr.Message)
		case err != nil:
			t.Fatalf("tools/call: %v (answer %s)", err, ex.Response)
		default:
			t.Logf("troupe refused with a result: %s", res.Text)
			if !res.IsError {
				t.Fatalf("shell.exec without elicitation: %+v, want a refusal", res)
			}
			if rt, _ := wire["resultType"].(string); rt != "complete" {
				t.Errorf("refusal's resultType %q, want complete (never input_required for a client without elicitation)", rt)
			}
		}
	})
}

// Over HTTP the Mcp-Method, Mcp-Name and MCP-Protocol-Version headers must
// agree with the body: a request whose headers were altered on the way (or
// are missing) is refused with 400 and -32020 instead of being answered.
func TestHeaderMismatch(t *testing.T) {
	cases := []struct {
		name    string
		rewrite func(http.Header)
	}{
		{"Mcp-Name names another tool", func(h http.Header) { h.Set("Mcp-Name", "repo.listDir") }},
		{"Mcp-Name missing", func(h http.Header) { h.Del("Mcp-Name") }},
		{"Mcp-Method names another method", func(h http.Header) { h.Set("Mcp-Method", "tools/list") }},
		{"Mcp-Method missing", func(h http.Header) { h.Del("Mcp-Method") }},
		{"MCP-Protocol-Version differs from _meta", func(h http.Header) { h.Set("MCP-Protocol-Version", legacyVersion) }},
	}
	for _, ck := range clients {
		t.Run(ck.name, func(t *testing.T) {
			fx := newFixture(t)
			tg := &target{name: "http", dir: fx.dir, http: startHTTPServer(t, fx.dir)}
			s, rec := connectModern(t, tg, ck)
			for _, tc := range cases {
				t.Run(tc.name, func(t *testing.T) {
					rec.rewrite.Store(&tc.rewrite)
					defer rec.rewrite.Store(nil)
					res, err := s.CallTool(ctxFor(t), "repo.readFile", map[string]any{"path": "README.md"}, nil)
					if err == nil {
						t.Errorf("the client reported success: %+v", res)
					}
					ex := rec.last("tools/call")
					if ex == nil || ex.Response == nil {
						t.Fatalf("no answer on the wire (client error: %v)", err)
					}
					if _, rerr := ex.result(); rerr == nil || rerr.Code != -32020 {
						t.Errorf("answer %s, want a -32020 error", ex.Response)
					}
					checkHTTP(t, ex, http.StatusBadRequest)
				})
			}
			// The same client, headers untouched, still works.
			if _, err := s.CallTool(ctxFor(t), "repo.readFile", map[string]any{"path": "README.md"}, nil); err != nil {
				t.Errorf("repo.readFile after the refusals: %v", err)
			}
		})
	}
}

// readFileContent is the file content in repo.readFile's text block (the
// JSON of its structured result).
func readFileContent(text string) string {
	var out struct {
		Content string `json:"content"`
	}
	if json.Unmarshal([]byte(text), &out) != nil {
		return ""
	}
	return out.Content
}

// checkComplete checks a 2026-07-28 result: resultType "complete", troupe's
// serverInfo in _meta (a SHOULD troupe follows), and when cacheable the
// caching hints the schema requires.
func checkComplete(t *testing.T, what string, res map[string]any, cacheable bool) {
	t.Helper()
	if rt, _ := res["resultType"].(string); rt != "complete" {
		t.Errorf("%s: resultType %v, want complete", what, res["resultType"])
	}
	meta, _ := res["_meta"].(map[string]any)
	info, _ := meta["io.modelcontextprotocol/serverInfo"].(map[string]any)
	if info["name"] != "troupe" || info["version"] == nil {
		t.Errorf("%s: _meta serverInfo %v, want troupe's name and version", what, meta["io.modelcontextprotocol/serverInfo"])
	}
	if !cacheable {
		return
	}
	if ttl, ok := res["ttlMs"].(float64); !ok || ttl < 0 || ttl != float64(int64(ttl)) {
		t.Errorf("%s: ttlMs %v, want an integer >= 0", what, res["ttlMs"])
	}
	if scope := res["cacheScope"]; scope != "public" && scope != "private" {
		t.Errorf("%s: cacheScope %v, want public or private", what, scope)
	}
}

// checkUnsupported checks an exchange was refused with -32022 naming the
// revisions troupe supports and the one asked for (HTTP: 400).
func checkUnsupported(t *testing.T, ex *exchange) {
	t.Helper()
	_, rerr := ex.result()
	if rerr == nil || rerr.Code != -32022 {
		t.Fatalf("%s at %s: answer %s, want a -32022 error", ex.Method, futureVersion, ex.Response)
	}
	var data struct {
		Supported []string `json:"supported"`
		Requested string   `json:"requested"`
	}
	if err := json.Unmarshal(rerr.Data, &data); err != nil {
		t.Fatalf("-32022 data %s: %v", rerr.Data, err)
	}
	for _, want := range []string{modernVersion, legacyVersion} {
		if !slices.Contains(data.Supported, want) {
			t.Errorf("-32022 data.supported %v lacks %s", data.Supported, want)
		}
	}
	if data.Requested != futureVersion {
		t.Errorf("-32022 data.requested %q, want %q", data.Requested, futureVersion)
	}
	checkHTTP(t, ex, http.StatusBadRequest)
}

// checkHTTP checks, for an exchange over HTTP, the status and that no
// session was minted (2026-07-28 has none).
func checkHTTP(t *testing.T, ex *exchange, status int) {
	t.Helper()
	if ex.ReqHeader == nil {
		return // stdio
	}
	if ex.Status != status {
		t.Errorf("%s: HTTP status %d, want %d", ex.Method, ex.Status, status)
	}
	if id := ex.RespHeader.Get("Mcp-Session-Id"); id != "" {
		t.Errorf("%s: troupe minted a session id %q for a 2026-07-28 request", ex.Method, id)
	}
}

// describe renders exchanges for a failure message.
func describe(exs []*exchange) string {
	var b strings.Builder
	for _, ex := range exs {
		b.WriteString("\n  → " + string(ex.Request))
		if ex.Status != 0 {
			b.WriteString("\n  ← HTTP " + http.StatusText(ex.Status))
		}
		b.WriteString("\n  ← " + string(ex.Response))
	}
	return b.String()
}
