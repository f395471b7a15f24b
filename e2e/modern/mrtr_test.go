package modern

import (
	"context"
	"os/exec"
	"strings"
	"testing"

	mcpgo "github.com/mark3labs/mcp-go/mcp"
	gosdk "github.com/modelcontextprotocol/go-sdk/mcp"
)

// connectGoSDKElicit connects the official Go SDK client with an
// elicitation handler that answers every approval with decision; its MRTR
// middleware runs the handler on an input_required result and retries the
// call with inputResponses and requestState. asked counts the prompts.
func connectGoSDKElicit(t *testing.T, tg *target, decision string, asked *int) *gosdk.ClientSession {
	t.Helper()
	rec := &recorder{}
	client := gosdk.NewClient(&gosdk.Implementation{Name: "troupe-e2e-go-sdk-mrtr", Version: "1.0.0"},
		&gosdk.ClientOptions{ElicitationHandler: func(_ context.Context, req *gosdk.ElicitRequest) (*gosdk.ElicitResult, error) {
			*asked++
			if !strings.Contains(req.Params.Message, "shell.exec") {
				t.Errorf("approval prompt does not name the tool: %q", req.Params.Message)
			}
			return &gosdk.ElicitResult{Action: "accept", Content: map[string]any{"decision": decision}}, nil
		}})
	var tr gosdk.Transport
	if tg.http != nil {
		tr = &gosdk.StreamableClientTransport{Endpoint: tg.http.url, HTTPClient: httpClient(rec, tg.http.token), MaxRetries: -1}
	} else {
		cmd := exec.Command(troupeBinary(t), tg.stdioArgs()...)
		cmd.Env = serverEnv()
		cmd.Stderr = tg.log
		tr = &gosdk.CommandTransport{Command: cmd, TerminateDuration: stopTimeout}
	}
	cs, err := client.Connect(ctxFor(t), tr, nil)
	if err != nil {
		t.Fatalf("connecting over %s: %v", tg.name, err)
	}
	t.Cleanup(func() { _ = cs.Close() })
	if v := cs.InitializeResult().ProtocolVersion; v != modernVersion {
		t.Fatalf("the client fell back to %q over %s", v, tg.name)
	}
	return cs
}

// An approved shell.exec through MRTR with the official Go SDK client: troupe
// answers input_required, the client's elicitation handler approves once,
// the retry runs the command (the marker file appears); a denial runs
// nothing.
func TestApprovalThroughMRTRGoSDK(t *testing.T) {
	forEachTransport(t, func(t *testing.T, fx fixture, tg *target) {
		for _, tc := range []struct {
			decision string
			runs     bool
		}{{"deny", false}, {"once", true}} {
			asked := 0
			cs := connectGoSDKElicit(t, tg, tc.decision, &asked)
			res, err := cs.CallTool(ctxFor(t), &gosdk.CallToolParams{Name: "shell.exec",
				Arguments: map[string]any{"command": []string{"sh", "-c", "echo ran > ran.txt"}}})
			if err != nil {
				t.Fatalf("%s: tools/call: %v", tc.decision, err)
			}
			if asked != 1 || res.IsError == tc.runs || exists(fx.dir, "ran.txt") != tc.runs {
				t.Fatalf("%s: asked %d times, isError %v, ran %v (log: %s)", tc.decision, asked, res.IsError,
					exists(fx.dir, "ran.txt"), tg.log.String())
			}
		}
	})
}

// mcpGoApprover answers troupe's approval with a fixed decision.
type mcpGoApprover struct {
	decision string
	asked    int
}

func (a *mcpGoApprover) Elicit(_ context.Context, req mcpgo.ElicitationRequest) (*mcpgo.ElicitationResult, error) {
	a.asked++
	return &mcpgo.ElicitationResult{ElicitationResponse: mcpgo.ElicitationResponse{
		Action: mcpgo.ElicitationResponseActionAccept, Content: map[string]any{"decision": a.decision}}}, nil
}

// The same through mcp-go v1.2.1's MRTR loop.
func TestApprovalThroughMRTRMCPGo(t *testing.T) {
	forEachTransport(t, func(t *testing.T, fx fixture, tg *target) {
		for _, tc := range []struct {
			decision string
			runs     bool
		}{{"deny", false}, {"once", true}} {
			a := &mcpGoApprover{decision: tc.decision}
			s, _, err := connectMCPGo(t, tg, connectOptions{elicit: a})
			if err != nil {
				t.Fatalf("connecting over %s: %v", tg.name, err)
			}
			t.Cleanup(func() { _ = s.Close() })
			if v := s.Version(); v != modernVersion {
				t.Fatalf("mcp-go fell back to %q", v)
			}
			res, err := s.CallTool(ctxFor(t), "shell.exec", map[string]any{"command": []string{"sh", "-c", "echo ran > ran.txt"}}, nil)
			if err != nil {
				t.Fatalf("%s: tools/call: %v", tc.decision, err)
			}
			if a.asked != 1 || res.IsError == tc.runs || exists(fx.dir, "ran.txt") != tc.runs {
				t.Fatalf("%s: asked %d times, isError %v, ran %v (log: %s)", tc.decision, a.asked, res.IsError,
					exists(fx.dir, "ran.txt"), tg.log.String())
			}
		}
	})
}
