package app

import (
	"encoding/json"
	"log/slog"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"troupe/config"
	"troupe/protocol"
	"troupe/redact"
)

// methodError sends a request and returns the error it was answered
// with (code 0 when it was answered with a result).
func (c *stdioClient) methodError(id int, method string, params any) (int64, string) {
	c.t.Helper()
	b, _ := json.Marshal(map[string]any{"jsonrpc": "2.0", "id": id, "method": method, "params": params})
	c.send(string(b))
	deadline := time.After(30 * time.Second) // a bound against hanging
	for {
		select {
		case l, ok := <-c.lines:
			if !ok {
				c.t.Fatal("the server closed stdout")
			}
			var m struct {
				ID    *int `json:"id"`
				Error *struct {
					Code    int64  `json:"code"`
					Message string `json:"message"`
				} `json:"error"`
			}
			if err := json.Unmarshal([]byte(l), &m); err != nil {
				c.t.Fatalf("%v: %s", err, l)
			}
			if m.ID == nil || *m.ID != id {
				continue // a notification
			}
			if m.Error == nil {
				return 0, ""
			}
			return m.Error.Code, m.Error.Message
		case <-deadline:
			c.t.Fatalf("no answer to %s", method)
		}
	}
}

// TestDenyRuleGovernsTheMethods: the management methods follow the tools
// they stand for — Codex's methods codex and codex-reply, execOneOffCommand
// shell.exec — so tools.deny, tools.allow, [codex] and [shell] govern them
// as they govern the tools, at start and at every reload. A method whose
// tools are not served is "method not found" (-32601) and starts nothing:
// the Codex binary is never run, no approval is asked.
func TestDenyRuleGovernsTheMethods(t *testing.T) {
	home, ws := t.TempDir(), t.TempDir()
	// A stand-in for Codex that only records that it was started (in the
	// workspace, which any run of Codex may write): the deny rule must
	// refuse before anything starts Codex.
	started := filepath.Join(ws, "codex-started")
	bin := filepath.Join(t.TempDir(), "codex")
	if err := os.WriteFile(bin, []byte("#!/bin/sh\necho started >> "+started+"\nexit 3\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	load := func(overrides ...string) *config.Config {
		t.Helper()
		cfg, err := config.Load(config.Options{
			Overrides: append([]string{"codex.binary=" + strconv.Quote(bin), "audit.enabled=false"}, overrides...),
			Environ:   []string{"HOME=" + home},
		})
		if err != nil {
			t.Fatal(err)
		}
		return cfg
	}
	a, err := New(load(`tools.deny=["shell.exec","codex","codex-reply"]`), Options{Workspace: ws, Version: "test",
		Logger: slog.New(slog.DiscardHandler), Secrets: &redact.Live{}})
	if err != nil {
		t.Fatal(err)
	}
	defer a.Close()
	c, inW, done := runStdio(t, a)

	id := 10
	expect := func(when, method string, params any, refused bool) {
		t.Helper()
		id++
		code, msg := c.methodError(id, method, params)
		if refused && code != protocol.CodeMethodNotFound {
			t.Errorf("%s: %s answered %d %q, want -32601 (method not found)", when, method, code, msg)
		}
		if !refused && code == protocol.CodeMethodNotFound {
			t.Errorf("%s: %s answered %d %q, want it served", when, method, code, msg)
		}
	}
	codexStarts := func() int {
		b, _ := os.ReadFile(started)
		return strings.Count(string(b), "started")
	}
	newConv := map[string]any{"cwd": ws, "config": map[string]any{"mcp_servers.p.command": "/bin/sh"}}
	oneOff := map[string]any{"command": []string{"touch", "ran"}}
	all := func(when string, codexRefused, shellRefused bool) {
		t.Helper()
		expect(when, "newConversation", newConv, codexRefused)
		expect(when, "getUserAgent", map[string]any{}, codexRefused)
		expect(when, "loginApiKey", map[string]any{"apiKey": "sk-test"}, codexRefused)
		expect(when, "execOneOffCommand", oneOff, shellRefused)
	}

	all("at start, tools.deny naming shell.exec, codex and codex-reply", true, true)
	if n := codexStarts(); n != 0 {
		t.Fatalf("denied methods started Codex %d times", n)
	}

	reload := func(overrides ...string) {
		t.Helper()
		if err := a.Reload(load(overrides...)); err != nil {
			t.Fatal(err)
		}
		c.notified("notifications/tools/list_changed") // the session has the new tool set
	}
	reload()
	all("after a reload without the deny", false, false)
	served := codexStarts()
	if served == 0 {
		t.Fatal("served Codex methods did not start Codex: the test proves nothing")
	}
	reload(`tools.deny=["codex-*"]`)
	all("after a reload denying codex-reply", true, false)
	reload(`tools.allow=["repo.*","shell.exec"]`)
	all("after a reload whose tools.allow leaves Codex out", true, false)
	reload("codex.enabled=false", "shell.enabled=false")
	all("after a reload disabling [codex] and [shell]", true, true)
	if n := codexStarts(); n != served {
		t.Errorf("denied methods started Codex %d times", n-served)
	}
	reload(`tools.deny=["shell.*"]`)
	all("after a reload denying shell.*", false, true)
	if codexStarts() == served {
		t.Error("the Codex methods were not served again after the last reload")
	}
	if _, err := os.Stat(filepath.Join(ws, "ran")); err == nil {
		t.Error("execOneOffCommand ran without an approval")
	}

	endStdio(t, inW, done)
}
