package downstream_test

import (
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"troupe/downstream"
)

// troupe declares elicitation in both modes, so a server shows the tools
// it offers only to clients that can be asked by URL.
func TestDeclaresFormAndURLElicitation(t *testing.T) {
	c := dial(t, fakeConfig(t, "normal", nil), downstream.Handlers{})
	var init struct {
		Capabilities struct {
			Elicitation map[string]json.RawMessage `json:"elicitation"`
		} `json:"capabilities"`
	}
	got := call(t, c, "initparams", "", downstream.Observer{})
	if err := json.Unmarshal([]byte(got), &init); err != nil {
		t.Fatalf("initialize params %s: %v", got, err)
	}
	if _, ok := init.Capabilities.Elicitation["form"]; !ok {
		t.Errorf("no form elicitation declared: %s", got)
	}
	if _, ok := init.Capabilities.Elicitation["url"]; !ok {
		t.Errorf("no url elicitation declared: %s", got)
	}
}

// A URL-mode elicitation reaches the call's Observer with its params as
// the server sent them, the answer goes back to the server, and the
// server's notifications/elicitation/complete for it (and only for it)
// reaches the Observer too.
func TestURLElicitationIsRelayed(t *testing.T) {
	c := dial(t, fakeConfig(t, "normal", nil), downstream.Handlers{})
	var asked json.RawMessage
	var completed []string
	got := call(t, c, "urlelicit", "", downstream.Observer{Elicit: func(_ context.Context, params json.RawMessage) (json.RawMessage, error) {
		asked = params
		return json.RawMessage(`{"action":"accept"}`), nil
	}, ElicitationComplete: func(params json.RawMessage) { completed = append(completed, string(params)) }})
	if len(completed) != 1 || completed[0] != `{"elicitationId":"e-1"}` {
		t.Errorf("elicitation/complete delivered: %q", completed)
	}
	var p map[string]string
	if err := json.Unmarshal(asked, &p); err != nil || p["mode"] != "url" || p["url"] != "https://example.com/auth?s=1" || p["elicitationId"] != "e-1" {
		t.Errorf("the observer got %s (%v)", asked, err)
	}
	if got != `elicited {"action":"accept"}` {
		t.Errorf("the server got %q", got)
	}
}

// The caller's _meta goes downstream beside troupe's own progress token:
// every member but progressToken, as sent (compacted onto the stdio line),
// and troupe's token is never replaced by the caller's.
func TestCallMetaGoesDownstream(t *testing.T) {
	c := dial(t, fakeConfig(t, "normal", nil), downstream.Handlers{})
	meta := json.RawMessage(`{"progressToken": 7, "callId":"call_1",
		"threadId":"th-9", "x-codex-turn-metadata":{"turn_id":"t1","sandbox":"read-only"}, "dev.troupe/timeoutMs": 5000}`)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	res, err := c.CallTool(downstream.WithCallMeta(ctx, meta), "params", json.RawMessage(`{"a":1}`), downstream.Observer{})
	if err != nil {
		t.Fatal(err)
	}
	var p struct {
		Arguments json.RawMessage            `json:"arguments"`
		Meta      map[string]json.RawMessage `json:"_meta"`
	}
	got := resultText(t, res)
	if err := json.Unmarshal([]byte(got), &p); err != nil {
		t.Fatalf("params %s: %v", got, err)
	}
	for k, want := range map[string]string{"callId": `"call_1"`, "threadId": `"th-9"`,
		"x-codex-turn-metadata": `{"turn_id":"t1","sandbox":"read-only"}`, "dev.troupe/timeoutMs": `5000`} {
		if string(p.Meta[k]) != want {
			t.Errorf("_meta.%s = %s, want %s (params %s)", k, p.Meta[k], want, got)
		}
	}
	if tok := string(p.Meta["progressToken"]); tok == "7" || !strings.HasPrefix(tok, `"`) {
		t.Errorf("progressToken %s: not troupe's own", tok)
	}
	if string(p.Arguments) != `{"a":1}` {
		t.Errorf("arguments %s", p.Arguments)
	}
	// Without WithCallMeta only the token goes.
	res, err = c.CallTool(ctx, "params", nil, downstream.Observer{})
	if err != nil {
		t.Fatal(err)
	}
	p.Meta = nil
	if err := json.Unmarshal([]byte(resultText(t, res)), &p); err != nil || len(p.Meta) != 1 {
		t.Errorf("plain call's _meta: %v (%v)", p.Meta, err)
	}
}

// A caller's _meta that is not an object fails the call before it is
// sent, with the reason.
func TestCallMetaMustBeAnObject(t *testing.T) {
	c := dial(t, fakeConfig(t, "normal", nil), downstream.Handlers{})
	_, err := c.CallTool(downstream.WithCallMeta(context.Background(), json.RawMessage(`[1]`)), "params", nil, downstream.Observer{})
	if err == nil || !strings.Contains(err.Error(), "_meta") {
		t.Fatalf("err %v", err)
	}
}
