package gate_test

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"troupe/config"
	"troupe/downstream"
	"troupe/gate"
	"troupe/protocol"
	"troupe/tools"
	"troupe/tools/proxy"
)

// downstream is a proxy.Server that is never called: the tests only need
// the tools proxy.Tool makes from a listing.
type proxied string

func (d proxied) Name() string { return string(d) }

func (d proxied) CallTool(context.Context, string, json.RawMessage, downstream.Observer) (json.RawMessage, error) {
	return nil, downstream.ErrClosed
}

// applyAdvice does to a config file what a refusal's advice says, the way
// an operator would: a key set in a named table (added to the table when
// the file has it, else a new table), or a tool added to approvals.trust.
// It fails the test when the advice names neither.
func applyAdvice(t *testing.T, file, advice string) []string {
	t.Helper()
	var variants []string
	setKey := regexp.MustCompile(`set (requires_approval = false) in (?:its|that server's) (\[[^\]]+\]) table`)
	if m := setKey.FindStringSubmatch(advice); m != nil {
		if i := strings.Index(file, m[2]+"\n"); i >= 0 {
			at := i + len(m[2]) + 1
			variants = append(variants, file[:at]+m[1]+"\n"+file[at:])
		} else {
			variants = append(variants, file+"\n"+m[2]+"\n"+m[1]+"\n")
		}
	}
	trust := regexp.MustCompile(`add ("[^"]+") to trust in the \[approvals\] table`)
	if m := trust.FindStringSubmatch(advice); m != nil {
		variants = append(variants, file+"\n[approvals]\ntrust = ["+m[1]+"]\n")
	}
	if len(variants) == 0 {
		t.Fatalf("the advice names no setting:\n%s", advice)
	}
	return variants
}

func load(t *testing.T, file string) (*config.Config, error) {
	t.Helper()
	dir := t.TempDir()
	p := filepath.Join(dir, "troupe.toml")
	if err := os.WriteFile(p, []byte(file), 0o600); err != nil {
		t.Fatal(err)
	}
	return config.Load(config.Options{File: p, Environ: []string{"HOME=" + dir}})
}

// A refusal of a downstream server's tool points at [mcp_servers.<server>]
// and approvals.trust, never at an [mcp.<tool>] table (a command tool
// without a command: troupe would refuse to start), and each piece of
// advice, applied to the config, loads and lets the tool run unasked.
func TestRefusalAdviceForADownstreamTool(t *testing.T) {
	base := "[mcp_servers.everything]\ncommand = \"node\"\nargs = [\"server.js\"]\n"
	if _, err := load(t, base); err != nil {
		t.Fatalf("the base config does not load: %v", err)
	}
	srv := proxied("everything")
	listing := json.RawMessage(`{"name":"toggle-simulated-logging","inputSchema":{"type":"object"}}`)
	tool, err := proxy.Tool(srv, listing, proxy.Options{Prefix: "everything", Separator: "."})
	if err != nil {
		t.Fatal(err)
	}
	reg, err := tools.NewRegistry(tool)
	if err != nil {
		t.Fatal(err)
	}
	entry, _ := reg.Lookup("everything.toggle-simulated-logging")
	for outcome, r := range map[string]gate.Refused{"unavailable": {Ending: gate.EndUnavailable}, "declined unseen": unseen, "expired": {Ending: gate.EndExpired}} {
		msg := gate.Refusal(entry.Spec(), r, gate.Policy{}).Message
		if strings.Contains(msg, "[mcp.") {
			t.Errorf("%s: the advice names an [mcp.…] table:\n%s", outcome, msg)
		}
		for _, want := range []string{"[mcp_servers.everything]", `approvals.trust = ["everything.toggle-simulated-logging"]`} {
			if !strings.Contains(msg, want) {
				t.Errorf("%s: the advice lacks %s:\n%s", outcome, want, msg)
			}
		}
	}
	advice := gate.Refusal(entry.Spec(), unseen, gate.Policy{}).Message
	for _, file := range applyAdvice(t, base, advice) {
		cfg, err := load(t, file)
		if err != nil {
			t.Fatalf("the advised config does not load: %v\n%s", err, file)
		}
		if len(cfg.Mcp) != 0 {
			t.Errorf("the advised config defines command tools: %v", cfg.Mcp)
		}
		s := cfg.McpServers["everything"]
		again, err := proxy.Tool(srv, listing, proxy.Options{Prefix: "everything", Separator: ".", RequiresApproval: s.RequiresApproval})
		if err != nil {
			t.Fatal(err)
		}
		spec := again.Spec()
		if spec.Safety.NeedsApproval() && !(gate.Policy{Trust: cfg.Approvals.Trust}).Trusts(spec) {
			t.Errorf("with the advice applied the tool still asks:\n%s", file)
		}
	}
}

// A server whose name is no bare TOML key is quoted in the advice.
func TestRefusalAdviceQuotesServerNames(t *testing.T) {
	spec := tools.Spec{Name: "my.server.echo", Meta: map[string]any{
		tools.MetaSource: "mcp_servers.my.server", protocol.MetaPrefix + "server": "my.server"}}
	msg := gate.Refusal(spec, unseen, gate.Policy{}).Message
	if !strings.Contains(msg, `[mcp_servers."my.server"]`) {
		t.Fatalf("advice: %s", msg)
	}
	file := "[mcp_servers.\"my.server\"]\nurl = \"http://127.0.0.1:1/mcp\"\n"
	for _, f := range applyAdvice(t, file, msg) {
		if _, err := load(t, f); err != nil {
			t.Errorf("the advised config does not load: %v\n%s", err, f)
		}
	}
}

// A command tool's refusal points at its own [mcp."<name>"] table and at
// approvals.trust; both load and stop the asking.
func TestRefusalAdviceForACommandTool(t *testing.T) {
	base := "[mcp.\"git.stamp\"]\ncommand = \"date\"\n"
	spec := tools.Spec{Name: "git.stamp", Safety: tools.Safety{RequiresApproval: true},
		Meta: map[string]any{tools.MetaSource: "config"}}
	msg := gate.Refusal(spec, unseen, gate.Policy{}).Message
	for _, want := range []string{`requires_approval = false in its [mcp."git.stamp"] table`, `approvals.trust = ["git.stamp"]`} {
		if !strings.Contains(msg, want) {
			t.Errorf("the advice lacks %s:\n%s", want, msg)
		}
	}
	for _, file := range applyAdvice(t, base, msg) {
		cfg, err := load(t, file)
		if err != nil {
			t.Fatalf("the advised config does not load: %v\n%s", err, file)
		}
		c := cfg.Mcp["git.stamp"]
		trusted := (gate.Policy{Trust: cfg.Approvals.Trust}).Trusts(spec)
		if !trusted && (c.RequiresApproval == nil || *c.RequiresApproval) {
			t.Errorf("with the advice applied the tool still asks:\n%s", file)
		}
	}
}

// A first-party tool has no table of its own: the advice is
// approvals.trust alone; a high-risk tool gets no configuration advice.
func TestRefusalAdviceForFirstPartyTools(t *testing.T) {
	spec := tools.Spec{Name: "repo.readFile", Safety: tools.Safety{RequiresApproval: true},
		Meta: map[string]any{tools.MetaSource: "first-party"}}
	msg := gate.Refusal(spec, gate.Refused{Ending: gate.EndUnavailable}, gate.Policy{}).Message
	if strings.Contains(msg, "requires_approval") || !strings.Contains(msg, `approvals.trust = ["repo.readFile"]`) {
		t.Errorf("first-party advice: %s", msg)
	}
	for _, f := range applyAdvice(t, "", msg) {
		cfg, err := load(t, f)
		if err != nil || !(gate.Policy{Trust: cfg.Approvals.Trust}).Trusts(spec) {
			t.Errorf("the advised config: %v, %+v", err, cfg)
		}
	}
	if msg := gate.Refusal(shellSpec(), unseen, gate.Policy{}).Message; strings.Contains(msg, "trust") &&
		!strings.Contains(msg, "whatever the configuration says") {
		t.Errorf("high-risk advice: %s", msg)
	}
}
