package app

import (
	"encoding/json"
	"io"
	"log/slog"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	"troupe/config"
	"troupe/observe"
)

// freeAddr is a loopback address that was free a moment ago.
func freeAddr(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	return ln.Addr().String()
}

// With metrics.listen, troupe serving stdio only serves /metrics and
// /status on that address, without a token: the metrics count a stdio
// call by its tool, the status JSON shows the stdio session, a Host that
// is not loopback is refused (DNS rebinding), and the server is gone once
// Run returns. Without metrics.listen, http.listen or tracing.endpoint
// nothing is observed at all.
func TestMetricsListenInStdioMode(t *testing.T) {
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
	plain, err := New(load(), Options{Workspace: t.TempDir(), Version: "test"})
	if err != nil {
		t.Fatal(err)
	}
	if plain.obs != nil {
		t.Error("stdio without metrics.listen or tracing: the App observes (nobody could see it)")
	}
	plain.Close()

	addr := freeAddr(t)
	var logs syncBuffer
	a, err := New(load(`metrics.listen="`+addr+`"`), Options{Workspace: t.TempDir(), Version: "test",
		Logger: slog.New(slog.NewTextHandler(&logs, nil))})
	if err != nil {
		t.Fatal(err)
	}
	defer a.Close()

	c, inW, done := runStdio(t, a)
	c.send(`{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"repo.listDir","arguments":{"path":"."}}}`)
	c.answer(2)

	client := &http.Client{Transport: &http.Transport{Proxy: nil}, Timeout: 10 * time.Second}
	get := func(path, host string) (int, string) {
		t.Helper()
		req, _ := http.NewRequest("GET", "http://"+addr+path, nil)
		if host != "" {
			req.Host = host
		}
		resp, err := client.Do(req)
		if err != nil {
			t.Fatalf("GET %s: %v", path, err)
		}
		defer resp.Body.Close()
		body, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(body)
	}
	// The call's record reaches the Hub when the call ends, which may be
	// a moment after its answer.
	deadline := time.Now().Add(10 * time.Second)
	for {
		code, body := get("/metrics", "")
		if code == 200 && strings.Contains(body, `troupe_calls_total{era="legacy",identity="local",outcome="ok",tool="repo.listDir"} 1`) {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("/metrics: %d, no call of repo.listDir counted:\n%s", code, body)
		}
		time.Sleep(50 * time.Millisecond)
	}
	code, body := get("/status/", "")
	var snap observe.Snapshot
	if err := json.Unmarshal([]byte(body), &snap); code != 200 || err != nil {
		t.Fatalf("/status/: %d %v %s", code, err, body)
	}
	if len(snap.Sessions) != 1 || snap.Sessions[0].Transport != "stdio" || snap.Version != "test" {
		t.Errorf("/status/ sessions %+v, version %q: want the stdio session", snap.Sessions, snap.Version)
	}
	if code, body := get("/status", ""); code != 200 || !strings.Contains(body, "<title>troupe status</title>") {
		t.Errorf("/status: %d", code)
	}
	if code, _ := get("/status", "rebind.example"); code != http.StatusForbidden {
		t.Errorf("a foreign Host: %d, want 403", code)
	}

	endStdio(t, inW, done)
	if _, err := client.Get("http://" + addr + "/metrics"); err == nil {
		t.Error("the metrics server still answers after Run returned")
	}
	if !strings.Contains(logs.String(), "serving /metrics and /status") {
		t.Errorf("no log line names the metrics address:\n%s", logs.String())
	}
}
