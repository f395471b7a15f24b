package proxy_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"testing"

	"troupe/downstream"
	"troupe/protocol"
	"troupe/tools"
	"troupe/tools/proxy"
	"troupe/tools/tooltest"
)

// fakeServer answers every call with result or err, after reporting
// through the observer.
type fakeServer struct {
	result string
	err    error
	got    struct {
		tool string
		args string
	}
}

func (f *fakeServer) Name() string { return "down" }

func (f *fakeServer) CallTool(ctx context.Context, tool string, args json.RawMessage, obs downstream.Observer) (json.RawMessage, error) {
	f.got.tool, f.got.args = tool, string(args)
	obs.Progress(1, 2, "half")
	obs.Log(protocol.LevelInfo, "down", json.RawMessage(`{"msg":"hi"}`))
	answer, err := obs.Elicit(ctx, json.RawMessage(`{"message":"ok?","requestedSchema":{"type":"object","properties":{}}}`))
	if err != nil || !strings.Contains(string(answer), "decline") {
		return nil, errors.New("elicitation not declined without a client")
	}
	return json.RawMessage(f.result), f.err
}

type recorder struct{ progress, logs int }

func (r *recorder) Progress(float64, float64, string) { r.progress++ }
func (r *recorder) Log(protocol.LoggingLevel, any)    { r.logs++ }
func (r *recorder) Ready(context.Context) error       { return nil }

const listed = `{"name":"echo","title":"Echo","description":"Echoes.","inputSchema":{"type":"object","properties":{"m":{"type":"string"}}},
"annotations":{"readOnlyHint":true,"title":"Echo"},"_meta":{"vendor/x":1}}`

func TestSpecPassesThrough(t *testing.T) {
	tl, err := proxy.Tool(&fakeServer{}, json.RawMessage(listed), proxy.Options{Prefix: "down", Separator: "."})
	if err != nil {
		t.Fatal(err)
	}
	s := tl.Spec()
	if s.Name != "down.echo" || s.Title != "Echo" || s.Description != "Echoes." || !strings.Contains(string(s.InputSchema), `"m"`) ||
		s.Annotations == nil || !*s.Annotations.ReadOnlyHint || s.Meta["vendor/x"] == nil || s.Meta[protocol.MetaPrefix+"server"] != "down" {
		t.Fatalf("spec %+v", s)
	}
	if s.Safety.NeedsApproval() {
		t.Error("a read-only downstream tool needs approval by default")
	}
	yes := true
	forced, _ := proxy.Tool(&fakeServer{}, json.RawMessage(listed), proxy.Options{RequiresApproval: &yes})
	if forced.Spec().Name != "echo" || !forced.Spec().Safety.NeedsApproval() {
		t.Fatalf("no prefix / forced approval: %+v", forced.Spec())
	}
	plain, _ := proxy.Tool(&fakeServer{}, json.RawMessage(`{"name":"w","inputSchema":{"type":"object"}}`), proxy.Options{})
	if !plain.Spec().Safety.NeedsApproval() {
		t.Error("an unannotated downstream tool does not need approval")
	}
	for _, bad := range []string{`[]`, `{"title":"no name"}`} {
		if _, err := proxy.Tool(&fakeServer{}, json.RawMessage(bad), proxy.Options{}); err == nil {
			t.Errorf("%s accepted", bad)
		}
	}
}

func TestResultsPassThrough(t *testing.T) {
	result := `{"content":[{"type":"text","text":"hi","annotations":{"audience":["user"]}},{"type":"image","data":"AAAA","mimeType":"image/png","_meta":{"k":"v"}},
{"type":"resource_link","uri":"file:///x","name":"x"}],"structuredContent":{"a":1},"isError":true,"_meta":{"m":2}}`
	srv := &fakeServer{result: result}
	tl, _ := proxy.Tool(srv, json.RawMessage(listed), proxy.Options{Prefix: "down", Separator: "."})
	rec := &recorder{}
	res, err := tl.Call(context.Background(), &tools.Request{Arguments: json.RawMessage(`{"m":"x"}`), Reporter: rec})
	if err != nil {
		t.Fatal(err)
	}
	if srv.got.tool != "echo" || srv.got.args != `{"m":"x"}` {
		t.Fatalf("forwarded %+v", srv.got)
	}
	if rec.progress != 1 || rec.logs != 1 {
		t.Fatalf("relayed %d progress, %d logs", rec.progress, rec.logs)
	}
	got, _ := json.Marshal(res)
	want := `{"content":[{"type":"text","text":"hi","annotations":{"audience":["user"]}},{"type":"image","data":"AAAA","mimeType":"image/png","_meta":{"k":"v"}},{"type":"resource_link","uri":"file:///x","name":"x"}],"structuredContent":{"a":1},"isError":true,"_meta":{"m":2}}`
	if string(got) != want {
		t.Fatalf("result\n%s\nwant\n%s", got, want)
	}
	// Older revisions still get their shape: a resource_link becomes text.
	old, _ := json.Marshal(protocol.ShapeResult(protocol.V20250326, res))
	if strings.Contains(string(old), "resource_link") || strings.Contains(string(old), "structuredContent") {
		t.Fatalf("2025-03-26 shape: %s", old)
	}
}

func TestErrorsMap(t *testing.T) {
	for _, c := range []struct {
		err  error
		kind tools.Kind
		text string
	}{
		{&downstream.RPCError{Code: -32602, Message: "bad params"}, proxy.KindDownstreamError, "bad params"},
		{downstream.ErrClosed, tools.KindUnavailable, "not connected"},
		// A refused or missing credential, also as the reason a server is
		// not connected: unauthenticated, naming the variable.
		{fmt.Errorf("upstream: %w", &downstream.AuthError{Server: "down", Status: 401, Vars: []string{"DOWN_TOKEN"}}),
			tools.KindUnauthenticated, "check the token in the environment variable DOWN_TOKEN"},
		{errors.Join(downstream.ErrClosed, &downstream.AuthError{Server: "down", Vars: []string{"DOWN_TOKEN"}}),
			tools.KindUnauthenticated, "set the environment variable DOWN_TOKEN"},
	} {
		tl, _ := proxy.Tool(&fakeServer{err: c.err}, json.RawMessage(listed), proxy.Options{})
		_, err := tl.Call(context.Background(), &tools.Request{Arguments: json.RawMessage(`{}`)})
		if e := tooltest.WantError(t, err, c.kind); !strings.Contains(e.Message, c.text) {
			t.Errorf("message %q lacks %q", e.Message, c.text)
		}
	}
	tl, _ := proxy.Tool(&fakeServer{result: `"not a result"`}, json.RawMessage(listed), proxy.Options{})
	_, err := tl.Call(context.Background(), &tools.Request{Arguments: json.RawMessage(`{}`)})
	if e := tooltest.WantError(t, err, proxy.KindDownstreamError); !strings.Contains(e.Message, "not a tool result") {
		t.Errorf("message %q", e.Message)
	}
}
