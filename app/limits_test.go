package app

import (
	"encoding/json"
	"log/slog"
	"strconv"
	"strings"
	"testing"
	"time"

	"troupe/config"
	"troupe/redact"
)

// A reload of [limits.rate] / [limits.identity] applies to the next call
// (it is no longer a change that waits for the next start), and stdio's
// local user is limited once limits are configured.
func TestReloadAppliesLimits(t *testing.T) {
	home := t.TempDir()
	load := func(overrides ...string) *config.Config {
		t.Helper()
		cfg, err := config.Load(config.Options{
			Overrides: append([]string{"codex.enabled=false", "audit.enabled=false"}, overrides...),
			Environ:   []string{"HOME=" + home},
		})
		if err != nil {
			t.Fatal(err)
		}
		return cfg
	}
	var logs syncBuffer
	a, err := New(load(), Options{Workspace: t.TempDir(), Version: "test",
		Logger: slog.New(slog.NewTextHandler(&logs, nil)), Secrets: &redact.Live{}})
	if err != nil {
		t.Fatal(err)
	}
	defer a.Close()
	c, inW, done := runStdio(t, a)
	// call answers the whole message (answer fails on an error).
	call := func(id int) map[string]any {
		t.Helper()
		c.send(`{"jsonrpc":"2.0","id":` + strconv.Itoa(id) + `,"method":"tools/call","params":{"name":"repo.listDir","arguments":{"path":"."}}}`)
		for {
			select {
			case l, ok := <-c.lines:
				var m map[string]any
				if !ok || json.Unmarshal([]byte(l), &m) != nil {
					t.Fatalf("no answer to call %d: %q", id, l)
				}
				if m["id"] == float64(id) {
					return m
				}
			case <-time.After(30 * time.Second):
				t.Fatalf("no answer to call %d", id)
			}
		}
	}
	for id := 10; id < 13; id++ { // no limits by default
		if m := call(id); m["error"] != nil {
			t.Fatalf("call %d without limits: %v", id, m)
		}
	}
	if err := a.Reload(load("limits.rate.calls_per_minute=1")); err != nil {
		t.Fatal(err)
	}
	if m := call(20); m["error"] != nil {
		t.Fatalf("first call after the reload: %v", m)
	}
	m := call(21)
	e, _ := m["error"].(map[string]any)
	if e == nil || e["code"] != -31429.0 || !strings.Contains(e["message"].(string), "local") {
		t.Fatalf("second call of 1 per minute: %v", m)
	}
	if strings.Contains(logs.String(), "take effect at the next start") {
		t.Errorf("a reload of the identities' limits was reported as waiting for the next start:\n%s", logs.String())
	}
	if err := a.Reload(load()); err != nil {
		t.Fatal(err)
	}
	if m := call(22); m["error"] != nil {
		t.Fatalf("after the limit was removed: %v", m)
	}
	endStdio(t, inW, done)
}
