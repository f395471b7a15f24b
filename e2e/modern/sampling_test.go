package modern

import (
	"context"
	"fmt"
	"os/exec"
	"strings"
	"sync"
	"testing"

	gosdk "github.com/modelcontextprotocol/go-sdk/mcp"
)

// A downstream server's sampling request during a call, with the server's
// `sampling = true`, reaches the go-sdk client that made the call in both of
// its eras: over the session (sampling/createMessage) for a 2025-11-25
// client, and as an input_required round whose retry carries the answer for
// a 2026-07-28 client. The servers ask in both of theirs: server-everything
// (session-based) with sampling/createMessage mid-call, the go-sdk
// 2026-07-28 server over stdio and HTTP with its own input_required round.
// troupe's approval of the call is asked first; the client's canned
// completion is what the tool returns.
func TestDownstreamSamplingReachesClientsOfBothEras(t *testing.T) {
	cfg := writeConfig(t, everythingTable(t, "sampling = true")+fmt.Sprintf(
		"[mcp_servers.modern]\ncommand = %q\nsampling = true\n\n[mcp_servers.modernhttp]\nurl = %q\nsampling = true\n\n",
		statelessServer(t), startStatelessHTTP(t)))
	forEachTransportWith(t, []string{"--config", cfg}, func(t *testing.T, fx fixture, tg *target) {
		for _, version := range []string{"", legacyVersion} {
			name := version
			if name == "" {
				name = modernVersion
			}
			t.Run(name, func(t *testing.T) {
				a := &answerer{}
				var mu sync.Mutex
				var prompts []string
				client := gosdk.NewClient(&gosdk.Implementation{Name: "troupe-e2e-sampling", Version: "1.0.0"},
					&gosdk.ClientOptions{
						ElicitationHandler: a.handle,
						CreateMessageHandler: func(_ context.Context, req *gosdk.CreateMessageRequest) (*gosdk.CreateMessageResult, error) {
							mu.Lock()
							for _, m := range req.Params.Messages {
								if tc, ok := m.Content.(*gosdk.TextContent); ok {
									prompts = append(prompts, tc.Text)
								}
							}
							mu.Unlock()
							return &gosdk.CreateMessageResult{Model: "canned", Role: "assistant",
								Content: &gosdk.TextContent{Text: "canned completion from the client"}}, nil
						},
					})
				cs := connectWith(t, tg, client, version)
				for _, c := range []struct {
					tool, prompt string
					args         map[string]any
				}{
					{"everything.trigger-sampling-request", "say hi", map[string]any{"prompt": "say hi", "maxTokens": 20}},
					{"modern.summarize", "Summarize: a long text", map[string]any{"text": "a long text"}},
					{"modernhttp.summarize", "Summarize: a long text", map[string]any{"text": "a long text"}},
				} {
					mu.Lock()
					prompts = nil
					mu.Unlock()
					before := len(a.messages())
					res, err := cs.CallTool(ctxFor(t), &gosdk.CallToolParams{Name: c.tool, Arguments: c.args})
					if err != nil {
						t.Fatalf("%s: %v (troupe's log:\n%s)", c.tool, err, tg.log)
					}
					text := toolText(res)
					if res.IsError || !strings.Contains(text, "canned completion from the client") {
						t.Fatalf("%s returned %q (isError %v; troupe's log:\n%s)", c.tool, text, res.IsError, tg.log)
					}
					mu.Lock()
					if len(prompts) != 1 || !strings.Contains(prompts[0], c.prompt) {
						t.Errorf("%s: the client was asked to sample %q", c.tool, prompts)
					}
					mu.Unlock()
					if asked := a.messages()[before:]; len(asked) != 1 || !strings.Contains(asked[0], c.tool) {
						t.Errorf("%s: troupe's approval: asked %q", c.tool, asked)
					}
				}
			})
		}
	})
}

// connectWith connects client to troupe at version ("" for the SDK's
// default, 2026-07-28).
func connectWith(t *testing.T, tg *target, client *gosdk.Client, version string) *gosdk.ClientSession {
	t.Helper()
	var tr gosdk.Transport
	if tg.http != nil {
		tr = &gosdk.StreamableClientTransport{Endpoint: tg.http.url, HTTPClient: httpClient(&recorder{}, tg.http.token), MaxRetries: -1}
	} else {
		cmd := exec.Command(troupeBinary(t), tg.stdioArgs()...)
		cmd.Env = serverEnv()
		cmd.Stderr = tg.log
		tr = &gosdk.CommandTransport{Command: cmd, TerminateDuration: stopTimeout}
	}
	cs, err := client.Connect(ctxFor(t), tr, &gosdk.ClientSessionOptions{ProtocolVersion: version})
	if err != nil {
		t.Fatalf("connecting over %s: %v", tg.name, err)
	}
	t.Cleanup(func() { _ = cs.Close() })
	return cs
}

// toolText is the text blocks of a result, joined.
func toolText(res *gosdk.CallToolResult) string {
	var b strings.Builder
	for _, c := range res.Content {
		if tc, ok := c.(*gosdk.TextContent); ok {
			b.WriteString(tc.Text)
		}
	}
	return b.String()
}
