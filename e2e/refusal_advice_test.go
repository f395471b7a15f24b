package e2e

import (
	"os"
	"regexp"
	"strings"
	"testing"
)

// A refused downstream tool's advice (issue 14, item 3), applied to the
// config as an operator would, lets troupe start and the tool run without
// asking. The old advice ([mcp."<tool>"] requires_approval = false) made
// troupe refuse to start: a command tool without a command.
func TestRefusalAdviceForADownstreamToolWorks(t *testing.T) {
	command, args := everythingStdioCommand(t)
	base := stdioServerTable("everything", command, args, "")
	call := `{"jsonrpc":"2.0","id":5,"method":"tools/call","params":{"name":"everything.toggle-simulated-logging","arguments":{}}}`

	// A client without elicitation cannot approve: troupe refuses.
	s := troupeWith(t, base)
	s.initializeAs(`{}`)
	s.send(call)
	res := s.recvResponse()
	advice := resultText(t, res)
	if !isToolError(res) || !strings.Contains(advice, "was not run") {
		t.Fatalf("want a refusal, got %v", res)
	}
	setKey := regexp.MustCompile(`set (requires_approval = false) in that server's (\[mcp_servers\.[^\]]+\]) table`)
	trust := regexp.MustCompile(`add ("everything\.toggle-simulated-logging") to trust in the \[approvals\] table`)
	m, tr := setKey.FindStringSubmatch(advice), trust.FindStringSubmatch(advice)
	if m == nil || tr == nil || strings.Contains(advice, "[mcp.") {
		t.Fatalf("the advice does not name [mcp_servers.everything] and approvals.trust:\n%s", advice)
	}
	if !strings.HasPrefix(base, m[2]+"\n") {
		t.Fatalf("the advice names %s; the config has %q", m[2], base)
	}
	for name, cfg := range map[string]string{
		"requires_approval": m[2] + "\n" + m[1] + "\n" + strings.TrimPrefix(base, m[2]+"\n"),
		"approvals.trust":   base + "\n[approvals]\ntrust = [" + tr[1] + "]\n",
	} {
		t.Run(name, func(t *testing.T) {
			fx := newFixture(t)
			file := downstreamConfig(t, cfg+waitForDownstreams)
			if b, err := os.ReadFile(file); err != nil || !strings.Contains(string(b), "everything") {
				t.Fatal(err)
			}
			s := startServer(t, fx.dir, "--config", file)
			s.initializeAs(`{}`)
			s.send(call)
			res := s.recvResponse()
			if text := resultText(t, res); isToolError(res) || !strings.Contains(text, "logging") {
				t.Fatalf("with the advice applied: %v", res)
			}
		})
	}
}
