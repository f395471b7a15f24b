package actors

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"troupe/actors/transport"
	"troupe/protocol"
	"troupe/tools"
)

func TestVersionNegotiation(t *testing.T) {
	cases := map[string]string{
		"2024-11-05": "2024-11-05",
		"2025-03-26": "2025-03-26",
		"2025-06-18": "2025-06-18",
		"2025-11-25": "2025-11-25",
		"1999-01-01": string(protocol.Latest),
		"2026-07-28": string(protocol.Latest),
	}
	for requested, want := range cases {
		t.Run(requested, func(t *testing.T) {
			c := newClient(t, Options{Session: SessionOptions{ServerInfo: protocol.Implementation{Name: "troupe", Title: "Troupe", Version: "1"}}}, echoTool())
			m := c.initialize(requested)
			var res struct {
				ProtocolVersion string                  `json:"protocolVersion"`
				Capabilities    map[string]any          `json:"capabilities"`
				ServerInfo      protocol.Implementation `json:"serverInfo"`
			}
			if err := json.Unmarshal(m.Result, &res); err != nil {
				t.Fatal(err)
			}
			if res.ProtocolVersion != want {
				t.Fatalf("requested %s: got %s, want %s", requested, res.ProtocolVersion, want)
			}
			if _, ok := res.Capabilities["tools"]; !ok {
				t.Fatalf("no tools capability: %s", m.raw)
			}
			if _, ok := res.Capabilities["logging"]; !ok {
				t.Fatalf("no logging capability: %s", m.raw)
			}
			// title exists from 2025-06-18 on only.
			hasTitle := res.ServerInfo.Title != ""
			if hasTitle != protocol.Version(want).HasTitles() {
				t.Fatalf("serverInfo.title present=%v under %s", hasTitle, want)
			}
		})
	}
}

func TestLifecycleErrors(t *testing.T) {
	c := newClient(t, Options{}, echoTool())
	// Before initialize: ping works, other requests do not.
	c.request(1, "ping", nil)
	if m := c.recv(); string(m.Result) != "{}" {
		t.Fatalf("ping before initialize: %s", m.raw)
	}
	c.request(2, "tools/list", nil)
	if m := c.recv(); m.Error == nil || m.Error.Code != protocol.CodeInvalidRequest {
		t.Fatalf("tools/list before initialize: %s", m.raw)
	}
	c.request(3, "initialize", map[string]any{"capabilities": map[string]any{}})
	if m := c.recv(); m.Error == nil || m.Error.Code != protocol.CodeInvalidParams {
		t.Fatalf("initialize without protocolVersion: %s", m.raw)
	}
	c.initialize("2025-06-18")
	c.request(4, "initialize", map[string]any{"protocolVersion": "2025-06-18"})
	m := c.recv()
	if m.Error == nil || m.Error.Message != "initialize called more than once" || string(m.ID) != "4" {
		t.Fatalf("second initialize: %s", m.raw)
	}
	// Unknown notifications are ignored; unknown requests are -32601.
	c.notify("notifications/whatever", nil)
	c.request("x", "no/such/method", nil)
	if m := c.recv(); m.Error == nil || m.Error.Code != protocol.CodeMethodNotFound || string(m.ID) != `"x"` {
		t.Fatalf("unknown method: %s", m.raw)
	}
	// Errors carry a correlation id.
	if !strings.Contains(m.raw, `"correlationId":"c-`) {
		t.Fatalf("error without correlation id: %s", m.raw)
	}
	c.request(5, "tools/list", map[string]any{"cursor": 7})
	if m := c.recv(); m.Error == nil || m.Error.Code != protocol.CodeInvalidParams {
		t.Fatalf("tools/list with a numeric cursor: %s", m.raw)
	}
	c.request(6, "logging/setLevel", map[string]any{"level": "loud"})
	if m := c.recv(); m.Error == nil || m.Error.Code != protocol.CodeInvalidParams {
		t.Fatalf("bad log level: %s", m.raw)
	}
	c.request(7, "tools/call", map[string]any{"arguments": map[string]any{}})
	if m := c.recv(); m.Error == nil || m.Error.Code != protocol.CodeInvalidParams {
		t.Fatalf("tools/call without name: %s", m.raw)
	}
	c.request(8, "tools/call", map[string]any{"name": "echo", "arguments": []int{1}})
	if m := c.recv(); m.Error == nil || m.Error.Code != protocol.CodeInvalidParams {
		t.Fatalf("tools/call with array arguments: %s", m.raw)
	}
	// And the session still works.
	c.request(9, "ping", nil)
	if m := c.recv(); string(m.ID) != "9" || string(m.Result) != "{}" {
		t.Fatalf("ping after errors: %s", m.raw)
	}
}

func TestToolsListPaginationAndShape(t *testing.T) {
	c := newClient(t, Options{Session: SessionOptions{PageSize: 2}},
		echoTool(), panicTool(), blockTool(nil, nil), sleepTool(0))
	c.initialize("2025-06-18")
	var names []string
	var cursor any
	for page := 0; page < 10; page++ {
		params := map[string]any{}
		if cursor != nil {
			params["cursor"] = cursor
		}
		c.request(page+1, "tools/list", params)
		m := c.recv()
		var res protocol.ListToolsResult
		if err := json.Unmarshal(m.Result, &res); err != nil {
			t.Fatalf("%s: %v", m.raw, err)
		}
		for _, tl := range res.Tools {
			names = append(names, tl.Name)
		}
		if res.NextCursor == "" {
			break
		}
		cursor = res.NextCursor
	}
	if got := strings.Join(names, ","); got != "block,echo,panic,sleep" {
		t.Fatalf("paged tool list = %s", got)
	}
	c.request(99, "tools/list", map[string]any{"cursor": "bm90IGEgY3Vyc29y"})
	if m := c.recv(); m.Error == nil || m.Error.Code != protocol.CodeInvalidParams {
		t.Fatalf("invalid cursor: %s", m.raw)
	}
}

func TestUnknownToolAndInvalidArguments(t *testing.T) {
	c := newClient(t, Options{}, echoTool())
	c.initialize("2025-11-25")
	c.request(1, "tools/call", map[string]any{"name": "nope"})
	r := c.toolResult(c.recv())
	if !r.IsError || !strings.Contains(errorText(r), `"nope"`) {
		t.Fatalf("unknown tool: %+v", r)
	}
	c.request(2, "tools/call", map[string]any{"name": "echo", "arguments": map[string]any{"n": -1, "extra": true}})
	r = c.toolResult(c.recv())
	text := errorText(r)
	if !r.IsError || !strings.Contains(text, "/n") || !strings.Contains(text, "extra") || !strings.Contains(text, "invalid_argument") {
		t.Fatalf("invalid arguments should list every violation: %q", text)
	}
	c.request(3, "tools/call", map[string]any{"name": "echo", "arguments": map[string]any{"n": 2}})
	if r := c.toolResult(c.recv()); r.IsError || !strings.Contains(errorText(r), `"n":2`) {
		t.Fatalf("valid call: %+v", r)
	}
}

func TestPanickingToolBecomesErrorResultAndSessionSurvives(t *testing.T) {
	c := newClient(t, Options{}, echoTool(), panicTool())
	c.initialize("2025-06-18")
	c.request(1, "tools/call", map[string]any{"name": "panic"})
	r := c.toolResult(c.recv())
	text := errorText(r)
	if !r.IsError || !strings.Contains(text, "correlation id: c-") || strings.Contains(text, "boom") || strings.Contains(text, "goroutine") {
		t.Fatalf("panic result must be an isError with a correlation id and no panic detail: %q", text)
	}
	meta, _ := json.Marshal(r.Meta)
	if !strings.Contains(string(meta), `"kind":"internal"`) {
		t.Fatalf("panic result _meta: %s", meta)
	}
	for i := 2; i < 5; i++ {
		c.request(i, "tools/call", map[string]any{"name": "echo"})
		if r := c.toolResult(c.recv()); r.IsError {
			t.Fatalf("session broken after a panic: %+v", r)
		}
	}
}

func TestSlowCallDoesNotDelayFastOnes(t *testing.T) {
	release := make(chan struct{})
	c := newClient(t, Options{}, echoTool(), blockTool(nil, release))
	c.initialize("2025-06-18")
	c.request("slow", "tools/call", map[string]any{"name": "block"})
	for i := 0; i < 20; i++ {
		c.request(i, "tools/call", map[string]any{"name": "echo"})
	}
	for i := 0; i < 20; i++ {
		if m := c.recv(); string(m.ID) == `"slow"` {
			t.Fatalf("slow call answered before the fast ones: %s", m.raw)
		}
	}
	close(release)
	if m := c.recv(); string(m.ID) != `"slow"` {
		t.Fatalf("want the slow call's answer, got %s", m.raw)
	}
}

func TestCancellationStopsTheCallAndSendsNoResponse(t *testing.T) {
	cancelled := make(chan struct{}, 1)
	c := newClient(t, Options{}, blockTool(cancelled, nil))
	c.initialize("2025-06-18")
	c.request(7, "tools/call", map[string]any{"name": "block", "_meta": map[string]any{"progressToken": "p7"}})
	// The tool reports progress first: it is relayed with the call's token.
	m := c.recv()
	if m.Method != "notifications/progress" || !strings.Contains(string(m.Params), `"progressToken":"p7"`) {
		t.Fatalf("want progress, got %s", m.raw)
	}
	c.notify("notifications/cancelled", map[string]any{"requestId": 7, "reason": "user gave up"})
	select {
	case <-cancelled:
	case <-time.After(5 * time.Second):
		t.Fatal("the tool's context was not cancelled")
	}
	c.request(8, "ping", nil)
	if m := c.recv(); string(m.ID) != "8" {
		t.Fatalf("a cancelled call must get no response; got %s", m.raw)
	}
	// Cancelling again, or an unknown id, is ignored.
	c.notify("notifications/cancelled", map[string]any{"requestId": 7})
	c.notify("notifications/cancelled", map[string]any{"requestId": "never"})
	c.expectNothing(100 * time.Millisecond)
}

func TestNoProgressWithoutToken(t *testing.T) {
	release := make(chan struct{})
	close(release)
	c := newClient(t, Options{}, blockTool(nil, release))
	c.initialize("2025-06-18")
	c.request(1, "tools/call", map[string]any{"name": "block"})
	if m := c.recv(); string(m.ID) != "1" {
		t.Fatalf("want only the result, got %s", m.raw)
	}
}

func TestServerSideDeadline(t *testing.T) {
	cancelled := make(chan struct{}, 1)
	c := newClient(t, Options{Session: SessionOptions{CallTimeout: 100 * time.Millisecond}}, blockTool(cancelled, nil))
	c.initialize("2025-06-18")
	c.request(1, "tools/call", map[string]any{"name": "block"})
	r := c.toolResult(c.recv())
	if !r.IsError || !strings.Contains(errorText(r), "deadline_exceeded") {
		t.Fatalf("want deadline_exceeded, got %+v", r)
	}
	select {
	case <-cancelled:
	case <-time.After(5 * time.Second):
		t.Fatal("the timed-out tool was not cancelled")
	}
}

func TestInFlightLimitAndDuplicateIDs(t *testing.T) {
	release := make(chan struct{})
	c := newClient(t, Options{Session: SessionOptions{MaxInFlight: 1}}, blockTool(nil, release))
	c.initialize("2025-06-18")
	c.request(1, "tools/call", map[string]any{"name": "block"})
	c.request(1, "tools/call", map[string]any{"name": "block"})
	if m := c.recv(); m.Error == nil || m.Error.Code != protocol.CodeInvalidRequest {
		t.Fatalf("duplicate id in flight: %s", m.raw)
	}
	c.request(2, "tools/call", map[string]any{"name": "block"})
	if m := c.recv(); m.Error == nil || m.Error.Code != protocol.CodeServerBusy {
		t.Fatalf("over the in-flight limit: %s", m.raw)
	}
	close(release)
	if m := c.recv(); string(m.ID) != "1" || m.Error != nil {
		t.Fatalf("first call: %s", m.raw)
	}
}

func TestLoggingLevelFiltersToolMessages(t *testing.T) {
	logTool := funcTool{name: "log", call: func(_ ctxT, req *toolsReq) (*protocol.CallToolResult, error) {
		req.Log(protocol.LevelDebug, "debug detail")
		req.Log(protocol.LevelError, "something bad")
		return textResult("ok"), nil
	}}
	c := newClient(t, Options{}, logTool)
	c.initialize("2025-06-18")
	c.request(1, "tools/call", map[string]any{"name": "log"})
	m := c.recv()
	if m.Method != "notifications/message" || !strings.Contains(string(m.Params), "something bad") {
		t.Fatalf("want the error-level message only (default threshold warning), got %s", m.raw)
	}
	if m := c.recv(); string(m.ID) != "1" {
		t.Fatalf("want the result, got %s", m.raw)
	}
	c.request(2, "logging/setLevel", map[string]any{"level": "debug"})
	if m := c.recv(); string(m.Result) != "{}" {
		t.Fatalf("setLevel: %s", m.raw)
	}
	c.request(3, "tools/call", map[string]any{"name": "log"})
	for _, want := range []string{"debug detail", "something bad"} {
		if m := c.recv(); m.Method != "notifications/message" || !strings.Contains(string(m.Params), want) {
			t.Fatalf("want %q, got %s", want, m.raw)
		}
	}
}

func TestBatchesOnlyUnder20250326(t *testing.T) {
	batch := `[{"jsonrpc":"2.0","id":1,"method":"ping"},{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"echo"}},{"jsonrpc":"2.0","method":"notifications/initialized"}]`

	c := newClient(t, Options{}, echoTool())
	c.initialize("2025-03-26")
	c.send(batch)
	m := c.recv()
	var arr []map[string]any
	if err := json.Unmarshal([]byte(m.raw), &arr); err != nil || len(arr) != 2 {
		t.Fatalf("want an array of two responses, got %s", m.raw)
	}

	c2 := newClient(t, Options{}, echoTool())
	c2.initialize("2025-06-18")
	c2.send(batch)
	m = c2.recv()
	if m.Error == nil || m.Error.Code != protocol.CodeInvalidRequest || string(m.ID) != "null" {
		t.Fatalf("batch under 2025-06-18 must be an invalid request, got %s", m.raw)
	}
	c2.request(3, "ping", nil)
	if m := c2.recv(); string(m.ID) != "3" {
		t.Fatalf("connection unusable after a rejected batch: %s", m.raw)
	}
}

func TestOldVersionsGetOldShapes(t *testing.T) {
	c := newClient(t, Options{}, structuredTool())
	c.initialize("2024-11-05")
	c.request(1, "tools/list", nil)
	m := c.recv()
	if strings.Contains(m.raw, "outputSchema") || strings.Contains(m.raw, `"title"`) {
		t.Fatalf("2024-11-05 tools must not carry outputSchema or title: %s", m.raw)
	}
	c.request(2, "tools/call", map[string]any{"name": "structured"})
	m = c.recv()
	if strings.Contains(m.raw, "structuredContent") || !strings.Contains(m.raw, `\"answer\":42`) {
		t.Fatalf("2024-11-05 result must carry the JSON as text only: %s", m.raw)
	}
}

func TestDrainLetsCallsFinish(t *testing.T) {
	c := newClient(t, Options{Grace: 5 * time.Second}, sleepTool(200*time.Millisecond))
	c.initialize("2025-06-18")
	c.request(1, "tools/call", map[string]any{"name": "sleep"})
	time.Sleep(20 * time.Millisecond) // let the call start before the input ends
	c.closeInput()
	m := c.recv()
	if r := c.toolResult(m); r.IsError {
		t.Fatalf("call in flight at end of input must finish: %s", m.raw)
	}
	select {
	case <-c.done:
	case <-time.After(5 * time.Second):
		t.Fatal("connection did not end after draining")
	}
	if _, open := <-c.lines; open {
		t.Fatal("output not closed after draining")
	}
}

func TestDrainGraceStopsStragglers(t *testing.T) {
	cancelled := make(chan struct{}, 1)
	c := newClient(t, Options{Grace: 100 * time.Millisecond}, blockTool(cancelled, nil))
	c.initialize("2025-06-18")
	c.request(1, "tools/call", map[string]any{"name": "block"})
	time.Sleep(20 * time.Millisecond)
	c.host.Drain()
	r := c.toolResult(c.recv())
	if !r.IsError || !strings.Contains(errorText(r), "shutting down") {
		t.Fatalf("straggler after the grace period: %+v", r)
	}
	select {
	case <-cancelled:
	case <-time.After(5 * time.Second):
		t.Fatal("straggler's tool was not cancelled")
	}
	select {
	case <-c.done:
	case <-time.After(5 * time.Second):
		t.Fatal("connection did not end")
	}
}

// TestSessionSurvivesAPanic injects a fault the real read path cannot
// produce (an Inbound without a request, which makes the session's Receive
// panic) and checks that its guardian resumes the session with its state:
// still initialized, still serving.
func TestSessionSurvivesAPanic(t *testing.T) {
	logs := &recorder{}
	c := newClient(t, Options{Logger: slog.New(logs)}, echoTool())
	c.initialize("2025-06-18")
	c.host.system.Root.Send(c.conn, &transport.Inbound{})
	c.request(1, "tools/call", map[string]any{"name": "echo"})
	if r := c.toolResult(c.recv()); r.IsError {
		t.Fatalf("session unusable after a panic: %+v", r)
	}
	if !logs.has("session failed handling a message; resuming") {
		t.Fatal("the injected panic was not supervised")
	}
}

// recorder is a slog.Handler that keeps record messages for assertions.
type recorder struct {
	mu   sync.Mutex
	msgs []string
}

func (r *recorder) Enabled(context.Context, slog.Level) bool { return true }
func (r *recorder) WithAttrs([]slog.Attr) slog.Handler       { return r }
func (r *recorder) WithGroup(string) slog.Handler            { return r }
func (r *recorder) Handle(_ context.Context, rec slog.Record) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.msgs = append(r.msgs, rec.Message)
	return nil
}

func (r *recorder) has(msg string) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	return slices.Contains(r.msgs, msg)
}

// A client may reuse a request id as soon as it has the answer.
func TestIDReusedAfterTheAnswer(t *testing.T) {
	c := newClient(t, Options{}, echoTool())
	c.initialize("2025-06-18")
	for i := range 50 {
		c.request(7, "tools/call", map[string]any{"name": "echo", "arguments": map[string]any{"n": i}})
		if r := c.toolResult(c.recv()); r.IsError || !strings.Contains(errorText(r), fmt.Sprintf(`"n":%d`, i)) {
			t.Fatalf("call %d: %+v", i, r)
		}
	}
}

// A tool's own notification method reaches the client tied to its call.
func TestToolNotificationsCarryTheRequestID(t *testing.T) {
	notifier := funcTool{name: "n", call: func(_ context.Context, req *tools.Request) (*protocol.CallToolResult, error) {
		req.Reporter.(tools.Notifier).Notify("codex/event", map[string]any{"msg": map[string]any{"type": "x"}})
		return textResult("done"), nil
	}}
	c := newClient(t, Options{}, notifier)
	c.initialize("2025-06-18")
	c.request("r1", "tools/call", map[string]any{"name": "n"})
	m := c.recv()
	if m.Method != "codex/event" || !strings.Contains(string(m.Params), `"_meta":{"requestId":"r1"}`) {
		t.Fatalf("want codex/event with the request id, got %s", m.raw)
	}
	if r := c.toolResult(c.recv()); r.IsError {
		t.Fatalf("%+v", r)
	}
}
