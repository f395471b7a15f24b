package e2e

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"
)

// smokeAttempts is how many times in a row TestCodexSmoke runs Codex over
// each transport.
const smokeAttempts = 3

// TestCodexSmoke is scripts/smoke: discovery and one tool call through the
// real Codex CLI, smokeAttempts times in a row over stdio and over HTTP with
// a bearer token (one server for all attempts, as a user would run it). It
// runs only with TROUPE_SMOKE=1 (the regular tests cover the same ground
// once) and prints one line per attempt, which scripts/smoke counts:
//
//	SMOKE stdio 1/3 PASS 2.9s
func TestCodexSmoke(t *testing.T) {
	if os.Getenv("TROUPE_SMOKE") != "1" {
		t.Skip("set TROUPE_SMOKE=1 (scripts/smoke) to run")
	}
	// Here a missing Codex is a failure, never a skip.
	bin := filepath.Join(moduleRoot, "e2e", "codex", "node_modules", ".bin", "codex")
	if _, err := os.Stat(bin); err != nil {
		t.Fatalf("the Codex CLI is missing (scripts/smoke installs it): %v", err)
	}
	for _, transport := range []string{"stdio", "http"} {
		t.Run(transport, func(t *testing.T) {
			fx := newFixture(t)
			var servers string
			var env []string
			if transport == "stdio" {
				servers = fmt.Sprintf("[mcp_servers.troupe]\ncommand = %q\nargs = [\"serve\", \"--workspace\", %q]\nenv = { XDG_STATE_HOME = %q }\n",
					troupeBinary(t), fx.dir, stateHome)
			} else {
				token := newToken(t)
				srv := startHTTPServer(t, fx.dir, token)
				servers = fmt.Sprintf("[mcp_servers.troupe]\nurl = %q\nbearer_token_env_var = %q\n", srv.url, tokenEnv)
				env = append(env, tokenEnv+"="+token)
			}
			for i := 1; i <= smokeAttempts; i++ {
				start := time.Now()
				ok := t.Run(fmt.Sprint(i), func(t *testing.T) { smokeOnce(t, fx, servers, env...) })
				verdict := "PASS"
				if !ok {
					verdict = "FAIL"
				}
				fmt.Printf("SMOKE %s %d/%d %s %.1fs\n", transport, i, smokeAttempts, verdict, time.Since(start).Seconds())
			}
		})
	}
}

// smokeOnce is one attempt: Codex must offer troupe's tools and hand back
// README.md as repo.readFile read it.
func smokeOnce(t *testing.T, fx fixture, servers string, env ...string) {
	run := runCodexCalls(t, fx.dir, servers, []codexCall{
		{"call_read", "repo_readFile", map[string]any{"path": "README.md"}},
	}, nil, env...)
	for _, want := range []string{"repo_listDir", "repo_readFile", "repo_ripgrep", "shell_exec"} {
		if !slices.Contains(run.offered, want) {
			t.Fatalf("Codex offered %v in mcp__troupe, without %s", run.offered, want)
		}
	}
	content, _ := json.Marshal(fx.readme)
	if out := run.output(t, "call_read"); !strings.Contains(out, `"content":`+string(content)) {
		t.Fatalf("repo.readFile: Codex handed back:\n%s", out)
	}
}
