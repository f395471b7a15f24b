package e2e

import (
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// TestCodexSeesTroupesToolsDespiteASlowDownstream: Codex lists tools once
// and sends its first model request about 0.85 s after starting troupe.
// With a downstream server that takes 6 s to start, troupe used to wait
// up to 10 s before answering, and its own tools were missing from Codex's
// first requests. With the default limits.mcp_servers_startup_wait, the
// first request has troupe's own tools and those of a downstream server
// that starts at once; the slow one's follow later (list_changed).
func TestCodexSeesTroupesToolsDespiteASlowDownstream(t *testing.T) {
	codexBinary(t)
	fx := newFixture(t)
	bin := troupeBinary(t)
	// Both downstream servers are troupe itself, serving the workspace;
	// "slow" sleeps 6 s first.
	cfg := filepath.Join(t.TempDir(), "troupe.toml")
	tables := ""
	for _, s := range []struct{ name, script string }{
		{"quick", `exec "$0" serve --workspace "$1"`},
		{"slow", `sleep 6; exec "$0" serve --workspace "$1"`},
	} {
		tables += fmt.Sprintf("[mcp_servers.%s]\ncommand = \"sh\"\nargs = [\"-c\", %q, %q, %q]\nenv = { XDG_STATE_HOME = %q }\nsandbox_profile = \"none\"\n\n",
			s.name, s.script, bin, fx.dir, stateHome)
	}
	if err := os.WriteFile(cfg, []byte(tables), 0o600); err != nil {
		t.Fatal(err)
	}
	servers := fmt.Sprintf("[mcp_servers.troupe]\ncommand = %q\nargs = [\"serve\", \"--workspace\", %q, \"--config\", %q]\nenv = { XDG_STATE_HOME = %q }\n",
		bin, fx.dir, cfg, stateHome)

	model := newScriptedModel(t, func(req modelRequest) modelItem { return message("done") })
	runCodex(t, model, fx.dir, servers, "list the tools")

	model.mu.Lock()
	defer model.mu.Unlock()
	if len(model.requests) == 0 {
		t.Fatal("Codex sent no model request")
	}
	first, ok := model.requests[0].namespace("mcp__troupe")
	if !ok {
		t.Fatal("Codex's first model request has none of troupe's tools")
	}
	for _, want := range []string{"repo_readFile", "quick_repo_readFile"} {
		if !slices.Contains(first, want) {
			t.Errorf("Codex's first model request lacks %s: %v", want, first)
		}
	}
	if slices.ContainsFunc(first, func(n string) bool { return strings.HasPrefix(n, "slow_") }) {
		t.Errorf("the slow server's tools were listed before it started: %v", first)
	}
}
