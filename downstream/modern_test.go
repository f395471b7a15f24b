package downstream_test

import (
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"troupe/actors"
	"troupe/downstream"
	"troupe/gate/approvalstate"
	"troupe/mcphttp"
	"troupe/protocol"
	"troupe/tools"
)

// dualEraServer is troupe's own HTTP front, which serves 2026-07-28 beside
// the handshake revisions and seals approval states: a real modern server.
func dualEraServer(t *testing.T, ts ...tools.Tool) (*actors.Host, string) {
	t.Helper()
	reg, err := tools.NewRegistry(ts...)
	if err != nil {
		t.Fatal(err)
	}
	sealer, err := approvalstate.New(approvalstate.Options{Key: approvalstate.NewKey(), TTL: time.Minute})
	if err != nil {
		t.Fatal(err)
	}
	discard := slog.New(slog.DiscardHandler)
	host := actors.NewHost(actors.Options{
		Session: actors.SessionOptions{Registry: reg, Approvals: sealer,
			ServerInfo: protocol.Implementation{Name: "troupe-modern", Version: "0"}},
		Grace: 2 * time.Second, Logger: discard,
	})
	srv := httptest.NewServer(mcphttp.New(host, mcphttp.Options{Logger: discard}))
	t.Cleanup(func() {
		srv.CloseClientConnections()
		srv.Close()
		if !host.Close(5 * time.Second) {
			t.Error("tool goroutines still running after Host.Close")
		}
	})
	return host, srv.URL + "/mcp"
}

// approvedTool needs a person's approval and echoes its arguments.
func approvedTool() tools.Tool {
	return gated{funcTool{name: "risky", call: func(_ context.Context, req *tools.Request) (*protocol.CallToolResult, error) {
		return textResult("ran " + string(req.Arguments)), nil
	}}}
}

type gated struct{ funcTool }

func (g gated) Spec() tools.Spec {
	s := g.funcTool.Spec()
	s.Safety.RequiresApproval = true
	return s
}

func modernConfig(url string) downstream.Config {
	return downstream.Config{Name: "modern", URL: url, ClientInfo: protocol.Implementation{Name: "troupe-test", Version: "0"}}
}

// A server that answers server/discover is used statelessly: no session,
// the revision's headers and _meta, progress on the call's own stream,
// and ping as server/discover.
func TestModernHTTPServerIsUsedStatelessly(t *testing.T) {
	_, url := dualEraServer(t, echoTool(), progressTool())
	c := dial(t, modernConfig(url), downstream.Handlers{})
	if c.Era() != protocol.EraStateless || c.ProtocolVersion() != protocol.V20260728 || downstream.SessionID(c) != "" {
		t.Fatalf("era %s, version %s, session %q", c.Era(), c.ProtocolVersion(), downstream.SessionID(c))
	}
	list, err := c.ListTools(context.Background())
	if err != nil || len(list) != 2 {
		t.Fatalf("tools/list: %d tools, %v", len(list), err)
	}
	if got := call(t, c, "echo", `{"x":"ünï"}`, downstream.Observer{}); got != `echo {"x":"ünï"}` {
		t.Fatalf("echo: %q", got)
	}
	var o observed
	if got := call(t, c, "progress", "", o.observer("")); got != "progressed" {
		t.Fatalf("progress: %q", got)
	}
	if progress, _, _ := o.snapshot(); len(progress) != 2 {
		t.Fatalf("progress relayed: %v", progress)
	}
	if err := c.Ping(context.Background()); err != nil {
		t.Fatalf("ping (server/discover): %v", err)
	}
}

// era = "legacy" skips the probe and uses initialize even with a dual-era
// server; era = "modern" refuses a legacy-only server.
func TestEraChoice(t *testing.T) {
	_, url := dualEraServer(t, echoTool())
	cfg := modernConfig(url)
	cfg.Era = downstream.ForceLegacy
	if c := dial(t, cfg, downstream.Handlers{}); c.Era() != protocol.EraHandshake || downstream.SessionID(c) == "" {
		t.Fatalf("forced legacy: era %s, session %q", c.Era(), downstream.SessionID(c))
	}
	cfg = fakeConfig(t, "plain", nil)
	cfg.Era = downstream.ForceModern
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if c, err := downstream.Dial(ctx, cfg, downstream.Handlers{}); err == nil || !strings.Contains(err.Error(), "2026-07-28") {
		if c != nil {
			c.Close()
		}
		t.Fatalf("a legacy server with era modern: %v", err)
	}
}

// A modern server's input_required reaches a caller that answers in rounds
// as *InputRequired (its state carries the server's requestState); the
// Resume with the answer completes the call. A caller that answers during
// the call has the round answered through Elicit and retried for it.
func TestModernInputRequiredRounds(t *testing.T) {
	_, url := dualEraServer(t, approvedTool())
	c := dial(t, modernConfig(url), downstream.Handlers{})
	ctx := context.Background()
	_, err := c.CallTool(ctx, "risky", json.RawMessage(`{"a":1}`), downstream.Observer{Rounds: true})
	var ir *downstream.InputRequired
	if !errors.As(err, &ir) || ir.Requests["approval"] == nil || ir.State == "" {
		t.Fatalf("want *InputRequired with troupe's approval question, got %v", err)
	}
	answer := json.RawMessage(`{"action":"accept","content":{"decision":"once"}}`)
	res, err := c.CallTool(ctx, "risky", json.RawMessage(`{"a":1}`), downstream.Observer{Rounds: true,
		Resume: &downstream.Resume{State: ir.State, Responses: map[string]json.RawMessage{"approval": answer}}})
	if err != nil || resultText(t, res) != `ran {"a":1}` {
		t.Fatalf("resumed: %s %v", res, err)
	}

	var o observed
	if got := call(t, c, "risky", `{"a":2}`, o.observer(string(answer))); got != `ran {"a":2}` {
		t.Fatalf("answered in the call: %q", got)
	}
	if _, _, asked := o.snapshot(); len(asked) != 1 || !strings.Contains(asked[0], "risky") {
		t.Fatalf("Elicit saw %q", asked)
	}
}

// A legacy server's elicitation in the middle of a call, for a caller that
// answers in rounds, parks the call: CallTool returns *InputRequired, the
// call stays open downstream, and Resume delivers the answer into it. A
// Resume after the wait expired finds nothing.
func TestLegacyElicitationParksTheCall(t *testing.T) {
	url := troupeServer(t, "", askTool())
	cfg := httpConfig(url, nil)
	cfg.ParkTimeout = time.Minute
	c := dial(t, cfg, downstream.Handlers{})
	ctx := context.Background()
	_, err := c.CallTool(ctx, "ask", nil, downstream.Observer{Rounds: true})
	var ir *downstream.InputRequired
	if !errors.As(err, &ir) || !strings.Contains(string(ir.Requests["elicitation"]), "may I?") {
		t.Fatalf("want the parked question, got %v", err)
	}
	res, err := c.CallTool(ctx, "ask", nil, downstream.Observer{Rounds: true, Resume: &downstream.Resume{State: ir.State,
		Responses: map[string]json.RawMessage{"elicitation": json.RawMessage(`{"action":"accept","content":{}}`)}}})
	if err != nil || resultText(t, res) != `client said {"action":"accept","content":{}}` {
		t.Fatalf("resumed: %s %v", res, err)
	}
	if _, err := c.CallTool(ctx, "ask", nil, downstream.Observer{Rounds: true, Resume: &downstream.Resume{State: ir.State,
		Responses: map[string]json.RawMessage{"elicitation": json.RawMessage(`{"action":"decline"}`)}}}); !errors.Is(err, downstream.ErrParkedGone) {
		t.Fatalf("a used state's call is gone: %v", err)
	}

	cfg.ParkTimeout = 50 * time.Millisecond
	short := dial(t, cfg, downstream.Handlers{})
	_, err = short.CallTool(ctx, "ask", nil, downstream.Observer{Rounds: true})
	if !errors.As(err, &ir) {
		t.Fatalf("want the parked question, got %v", err)
	}
	time.Sleep(300 * time.Millisecond)
	if _, err := short.CallTool(ctx, "ask", nil, downstream.Observer{Rounds: true, Resume: &downstream.Resume{State: ir.State,
		Responses: map[string]json.RawMessage{"elicitation": json.RawMessage(`{"action":"decline"}`)}}}); !errors.Is(err, downstream.ErrParkedGone) {
		t.Fatalf("an expired wait: %v", err)
	}
}

// A modern server announces tools list changes on subscriptions/listen,
// which the client keeps open in place of the legacy GET stream.
func TestModernListenHearsToolsChanges(t *testing.T) {
	host, url := dualEraServer(t, echoTool())
	changed := make(chan struct{}, 4)
	var logs logBuffer
	cfg := modernConfig(url)
	cfg.Logger = logs.logger()
	c := dial(t, cfg, downstream.Handlers{ToolsChanged: func() { changed <- struct{}{} }})
	defer func() { t.Log(logs.String()) }()
	if c.Era() != protocol.EraStateless {
		t.Fatalf("era %s", c.Era())
	}
	one, err := tools.NewRegistry(echoTool())
	if err != nil {
		t.Fatal(err)
	}
	two, err := tools.NewRegistry(echoTool(), progressTool())
	if err != nil {
		t.Fatal(err)
	}
	deadline := time.After(10 * time.Second)
	for i := 0; ; i++ {
		// Change the list until the subscription is surely open.
		host.SetRegistry([]*tools.Registry{two, one}[i%2])
		select {
		case <-changed:
			return
		case <-time.After(200 * time.Millisecond):
		case <-deadline:
			t.Fatal("no tools list change heard")
		}
	}
}
