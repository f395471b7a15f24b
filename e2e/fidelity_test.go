package e2e

// Downstream fidelity (issue 14, item 8): what a client sees of a
// downstream server through troupe is what it sees directly. troupe
// declares elicitation in form and URL mode to the downstream (so
// server-everything lists the same tools as to a client declaring both),
// relays URL-mode elicitation to a client that declared it (and declines
// for one that did not), passes the calling client's _meta downstream
// beside its own progress token, and logs each naming problem once.

import (
	"encoding/json"
	"fmt"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"
)

// bothModes is the elicitation capability of a client that renders forms
// and opens URLs (what Codex declares).
const bothModes = `{"elicitation":{"form":{},"url":{}}}`

// startProcess runs a downstream server directly as a JSON-RPC peer.
func startProcess(t *testing.T, cmd *exec.Cmd) *stdioServer {
	t.Helper()
	return startPeer(t, cmd, false)
}

// initializeAs runs the handshake declaring caps (a JSON object).
func (s *stdioServer) initializeAs(caps string) {
	s.t.Helper()
	s.send(`{"jsonrpc":"2.0","id":"init","method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":` + caps +
		`,"clientInfo":{"name":"e2e","version":"1"}}}`)
	if m := s.recvResponse(); m["error"] != nil {
		s.t.Fatalf("initialize: %v", m)
	}
	s.send(`{"jsonrpc":"2.0","method":"notifications/initialized"}`)
}

// listNames lists every tool (all pages) and returns the names.
func (s *stdioServer) listNames() []string {
	s.t.Helper()
	var names []string
	cursor := ""
	for page := 1; ; page++ {
		params := `{}`
		if cursor != "" {
			params = fmt.Sprintf(`{"cursor":%q}`, cursor)
		}
		s.send(fmt.Sprintf(`{"jsonrpc":"2.0","id":"list-%d","method":"tools/list","params":%s}`, page, params))
		m := s.recvResponse()
		res, ok := m["result"].(map[string]any)
		if !ok {
			s.t.Fatalf("tools/list: %v", m)
		}
		for _, tl := range res["tools"].([]any) {
			names = append(names, tl.(map[string]any)["name"].(string))
		}
		if cursor, _ = res["nextCursor"].(string); cursor == "" {
			return names
		}
	}
}

// recvMessage returns the next request or response, skipping
// notifications.
func (s *stdioServer) recvMessage() map[string]any {
	s.t.Helper()
	for {
		if m := s.recv(); m["id"] != nil {
			return m
		}
	}
}

// waitForDownstreams makes troupe wait for its downstream servers before
// it answers, so the first tools/list has their tools even on a loaded
// machine (the default wait is short, for Codex's sake).
const waitForDownstreams = "\n[limits]\nmcp_servers_startup_wait = \"8s\"\n"

// troupeWith starts troupe serving the config file tables (TOML), waiting
// for its downstream servers before it answers.
func troupeWith(t *testing.T, tables string) *stdioServer {
	t.Helper()
	fx := newFixture(t)
	return startServer(t, fx.dir, "--config", downstreamConfig(t, tables+waitForDownstreams))
}

// recorderTable is an [mcp_servers.<name>] table for recorder.mjs, the
// downstream that shows what it received.
func recorderTable(t *testing.T, name string) string {
	t.Helper()
	requireDownstream(t)
	return stdioServerTable(name, nodeBinary(t), []string{filepath.Join(moduleRoot, "e2e", "downstream", "recorder.mjs")}, "")
}

// server-everything lists the same tools through troupe as to a client
// that talks to it directly and declares form and URL elicitation: 15,
// trigger-url-elicitation among them (troupe used to declare form mode
// only and showed 14).
func TestDownstreamEverythingListsAsManyToolsAsDirect(t *testing.T) {
	command, args := everythingStdioCommand(t)
	direct := startProcess(t, exec.Command(command, args...))
	direct.initializeAs(bothModes)
	want := direct.listNames()
	if !slices.Contains(want, "trigger-url-elicitation") || len(want) != 15 {
		t.Fatalf("server-everything directly: %d tools %q", len(want), want)
	}

	s := troupeWith(t, stdioServerTable("everything", command, args, ""))
	s.initializeAs(bothModes)
	var got []string
	for _, n := range s.listNames() {
		if rest, ok := strings.CutPrefix(n, "everything."); ok {
			got = append(got, rest)
		}
	}
	slices.Sort(got)
	slices.Sort(want)
	if !slices.Equal(got, want) {
		t.Fatalf("through troupe: %d tools %q\ndirectly: %d tools %q", len(got), got, len(want), want)
	}
}

// A downstream's URL-mode elicitation reaches a client that declared URL
// mode, with its url and elicitationId, and the client's answer goes back
// to the downstream; a client that declared form mode only is never sent
// it: troupe declines for it.
func TestDownstreamURLElicitationIsRelayed(t *testing.T) {
	command, args := everythingStdioCommand(t)
	table := stdioServerTable("everything", command, args, "requires_approval = false")
	call := `{"jsonrpc":"2.0","id":7,"method":"tools/call","params":{"name":"everything.trigger-url-elicitation",` +
		`"arguments":{"url":"https://example.com/login","elicitationId":"e2e-1","message":"sign in"}}}`

	t.Run("to a client that declared url mode", func(t *testing.T) {
		s := troupeWith(t, table)
		s.initializeAs(bothModes)
		s.send(call)
		m := s.recvMessage()
		if m["method"] != "elicitation/create" {
			t.Fatalf("want elicitation/create first, got %v", m)
		}
		p, _ := m["params"].(map[string]any)
		if p["mode"] != "url" || p["url"] != "https://example.com/login" || p["elicitationId"] != "e2e-1" || p["message"] != "sign in" {
			t.Errorf("relayed params: %v", p)
		}
		id, _ := json.Marshal(m["id"])
		s.send(`{"jsonrpc":"2.0","id":` + string(id) + `,"result":{"action":"accept"}}`)
		res := s.recvMessage()
		if text := resultText(t, res); isToolError(res) || !strings.Contains(text, "User completed the URL elicitation flow") ||
			!strings.Contains(text, "e2e-1") {
			t.Errorf("result: %v", res)
		}
	})
	t.Run("to a client that declared form mode only", func(t *testing.T) {
		s := troupeWith(t, table)
		s.initializeAs(`{"elicitation":{"form":{}}}`)
		s.send(call)
		m := s.recvMessage()
		if m["method"] != nil {
			t.Fatalf("troupe sent the client %v", m)
		}
		if text := resultText(t, m); !strings.Contains(text, "User declined") {
			t.Errorf("result: %v", m)
		}
	})
}

// The calling client's _meta reaches the downstream server: every member
// as sent, except that the progress token is troupe's own.
func TestDownstreamGetsTheCallersMeta(t *testing.T) {
	s := troupeWith(t, recorderTable(t, "rec"))
	s.initializeAs(bothModes)
	if names := s.listNames(); !slices.Contains(names, "rec.received") {
		t.Fatalf("tools: %q", names)
	}
	s.send(`{"jsonrpc":"2.0","id":3,"method":"tools/call","params":{"name":"rec.received","arguments":{},"_meta":{` +
		`"progressToken":"mine","callId":"call_9","threadId":"th-1","x-codex-turn-metadata":{"turn_id":"t-2","sandbox":"read-only"},"vendor/x":[1,2]}}}`)
	res := s.recvResponse()
	var got map[string]json.RawMessage
	if err := json.Unmarshal([]byte(resultText(t, res)), &got); err != nil {
		t.Fatalf("recorder answered %v (%v)", res, err)
	}
	for k, want := range map[string]string{"callId": `"call_9"`, "threadId": `"th-1"`,
		"x-codex-turn-metadata": `{"turn_id":"t-2","sandbox":"read-only"}`, "vendor/x": `[1,2]`} {
		if string(got[k]) != want {
			t.Errorf("downstream _meta.%s = %s, want %s", k, got[k], want)
		}
	}
	if tok := string(got["progressToken"]); !strings.HasPrefix(tok, `"troupe-`) {
		t.Errorf("downstream progressToken %s, want troupe's own", tok)
	}
}

// Each naming problem is logged once, not at every registry rebuild
// (troupe rebuilds when a downstream connects and again once it settled).
func TestNamingWarningsAreLoggedOnce(t *testing.T) {
	command, args := everythingStdioCommand(t)
	s := troupeWith(t, stdioServerTable("everything", command, args, "")+
		"[mcp.\"everything.echo\"]\ncommand = \"echo\"\n")
	s.initializeAs(`{}`)
	if names := s.listNames(); !slices.Contains(names, "everything.get-sum") {
		t.Fatalf("tools: %q", names)
	}
	s.stdin.Close()
	select {
	case err := <-s.exited:
		s.exited <- err // for the cleanup, which waits too
	case <-time.After(15 * time.Second):
		t.Fatal("troupe did not exit")
	}
	var collision, renamed int
	for _, line := range strings.Split(s.stderrText(), "\n") {
		if !strings.Contains(line, "WRN") && !strings.Contains(line, "level=WARN") {
			continue
		}
		if strings.Contains(line, "tool name collision") && strings.Contains(line, "everything.echo") {
			collision++
		}
		if strings.Contains(line, "tool name") && strings.Contains(line, "tool=everything.get-sum") {
			renamed++
		}
	}
	if collision != 1 || renamed > 1 {
		t.Errorf("the collision was logged %d times, the name of everything.get-sum %d times; want once each:\n%s",
			collision, renamed, s.stderrText())
	}
}
