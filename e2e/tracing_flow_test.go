package e2e

import (
	"encoding/hex"
	"encoding/json"
	"fmt"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	tracepb "go.opentelemetry.io/proto/otlp/trace/v1"
)

// span returns the first span named name in trace whose parent is parent
// (hex; "" for any), nil until it arrives.
func (o *otlpReceiver) span(trace, name, parent string) *tracepb.Span {
	o.mu.Lock()
	defer o.mu.Unlock()
	for _, s := range o.spans {
		if hex.EncodeToString(s.GetTraceId()) == trace && s.GetName() == name &&
			(parent == "" || hex.EncodeToString(s.GetParentSpanId()) == parent) {
			return s
		}
	}
	return nil
}

// dump lists the spans received, for a failure's message.
func (o *otlpReceiver) dump() string {
	o.mu.Lock()
	defer o.mu.Unlock()
	var got []string
	for _, sp := range o.spans {
		got = append(got, fmt.Sprintf("%q trace %x span %x parent %x attrs %v",
			sp.GetName(), sp.GetTraceId(), sp.GetSpanId(), sp.GetParentSpanId(), sp.GetAttributes()))
	}
	return strings.Join(got, "\n")
}

// awaitSpan waits (spans go out in batches, and at exit) for the span
// named name in trace, a child of parent, or fails with what did arrive.
func (o *otlpReceiver) awaitSpan(t *testing.T, deadline time.Time, trace, name, parent string) *tracepb.Span {
	t.Helper()
	for {
		if s := o.span(trace, name, parent); s != nil {
			return s
		}
		if time.Now().After(deadline) {
			t.Fatalf("no span %q in trace %s with parent %s among those received:\n%s", name, trace, parent, o.dump())
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// spanAttr is the string value of span's attribute key, "" if none.
func spanAttr(s *tracepb.Span, key string) string {
	for _, kv := range s.GetAttributes() {
		if kv.GetKey() == key {
			return kv.GetValue().GetStringValue()
		}
	}
	return ""
}

// awaitCallResponse reads troupe's messages until the response to id,
// accepting any approval request on the way, and fails if the call failed.
func (s *stdioServer) awaitCallResponse(id float64) map[string]any {
	s.t.Helper()
	for {
		m := s.recv()
		if m["method"] == "elicitation/create" {
			rid, _ := json.Marshal(m["id"])
			s.send(`{"jsonrpc":"2.0","id":` + string(rid) + `,"result":{"action":"accept","content":{"decision":"once"}}}`)
			continue
		}
		if got, _ := m["id"].(float64); got == id && m["method"] == nil {
			if m["error"] != nil || isToolError(m) {
				s.t.Fatalf("call %v failed: %v", id, m)
			}
			return m
		}
	}
}

// TestTracesFollowApprovalAndDownstream: one trace, the client's, follows a
// call through troupe. A shell.exec call that a person approves reaches the
// collector as the call's span (a child of the client's span) with the
// approval wait and the sandbox's start as its children; a call proxied to a
// downstream MCP server is a "downstream <server>" span, and the server gets
// a traceparent of the same trace whose parent is that span, with the
// client's tracestate and baggage. No span carries an argument's value.
func TestTracesFollowApprovalAndDownstream(t *testing.T) {
	recv := &otlpReceiver{}
	collector := httptest.NewServer(recv)
	defer collector.Close()
	cfg := downstreamConfig(t, fmt.Sprintf("[tracing]\nendpoint = %q\n\n", collector.URL+"/v1/traces")+recorderTable(t, "rec"))
	fx := newFixture(t)
	s := startServer(t, fx.dir, "--config", cfg)
	s.initializeWithElicitation()

	const (
		clientTrace = "0af7651916cd43dd8448eb211c80319c"
		shellSpan   = "b7ad6b7169203331"
		recSpan     = "00f067aa0ba902b7"
		tracestate  = "vendor=e2e,other=x1"
		bag         = "tenant=e2e-tenant"
		marker      = "troupe-trace-arg-marker-7f3a"
	)
	meta := func(span string) string {
		return `"_meta":{"traceparent":"00-` + clientTrace + `-` + span + `-01","tracestate":"` + tracestate +
			`","baggage":"` + bag + `"}`
	}

	// shell.exec: a person is asked, and approves once.
	s.send(`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"shell.exec","arguments":{"command":["sh","-c","echo ` +
		marker + `"]},` + meta(shellSpan) + `}}`)
	m := s.recv()
	if m["method"] != "elicitation/create" {
		t.Fatalf("want an approval request for shell.exec, got %v", m)
	}
	id, _ := json.Marshal(m["id"])
	time.Sleep(50 * time.Millisecond) // a wait the approval span can show
	s.send(`{"jsonrpc":"2.0","id":` + string(id) + `,"result":{"action":"accept","content":{"decision":"once"}}}`)
	if res := s.awaitCallResponse(1); !strings.Contains(resultText(t, res), marker) {
		t.Fatalf("shell.exec: %v", res)
	}

	// The downstream recorder answers with the _meta it received.
	s.send(`{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"rec.received","arguments":{"note":"` +
		marker + `"},` + meta(recSpan) + `}}`)
	res := s.awaitCallResponse(2)
	var got struct {
		Traceparent string `json:"traceparent"`
		Tracestate  string `json:"tracestate"`
		Baggage     string `json:"baggage"`
	}
	if err := json.Unmarshal([]byte(resultText(t, res)), &got); err != nil {
		t.Fatalf("the recorder answered %v (%v)", res, err)
	}
	tp := strings.Split(got.Traceparent, "-")
	if len(tp) != 4 || tp[0] != "00" || tp[1] != clientTrace || len(tp[2]) != 16 || tp[2] == recSpan {
		t.Fatalf("downstream _meta.traceparent %q: want one of trace %s whose parent is troupe's span, not the client's",
			got.Traceparent, clientTrace)
	}
	if got.Tracestate != tracestate {
		t.Errorf("downstream _meta.tracestate %q, want the client's %q", got.Tracestate, tracestate)
	}
	if !strings.Contains(got.Baggage, bag) {
		t.Errorf("downstream _meta.baggage %q, want the client's %q", got.Baggage, bag)
	}

	// troupe flushes its spans at exit.
	s.stdin.Close()
	s.exited <- <-s.exited // wait for the exit, and leave it for the cleanup

	deadline := time.Now().Add(20 * time.Second)
	call := recv.awaitSpan(t, deadline, clientTrace, "tools/call shell.exec", shellSpan)
	callID := hex.EncodeToString(call.GetSpanId())
	if c := spanAttr(call, "troupe.correlation_id"); !strings.HasPrefix(c, "c-") {
		t.Errorf("the shell.exec span has correlation id %q", c)
	}
	approval := recv.awaitSpan(t, deadline, clientTrace, "approval", callID)
	if o := spanAttr(approval, "troupe.outcome"); o != "approved" {
		t.Errorf("the approval span's outcome %q, want approved", o)
	}
	if d := time.Duration(approval.GetEndTimeUnixNano() - approval.GetStartTimeUnixNano()); d < 50*time.Millisecond {
		t.Errorf("the approval span lasts %s, shorter than the person took", d)
	}
	if approval.GetStartTimeUnixNano() < call.GetStartTimeUnixNano() || approval.GetEndTimeUnixNano() > call.GetEndTimeUnixNano() {
		t.Errorf("the approval span [%d, %d] is not within the call's [%d, %d]", approval.GetStartTimeUnixNano(),
			approval.GetEndTimeUnixNano(), call.GetStartTimeUnixNano(), call.GetEndTimeUnixNano())
	}
	sandbox := recv.awaitSpan(t, deadline, clientTrace, "sandbox.start", callID)
	if sandbox.GetStartTimeUnixNano() < approval.GetEndTimeUnixNano() {
		t.Error("the sandbox started before the approval ended")
	}

	recCall := recv.awaitSpan(t, deadline, clientTrace, "tools/call rec.received", recSpan)
	down := recv.awaitSpan(t, deadline, clientTrace, "downstream rec", hex.EncodeToString(recCall.GetSpanId()))
	if id := hex.EncodeToString(down.GetSpanId()); id != tp[2] {
		t.Errorf("the downstream got parent span %s, want troupe's %q span %s", tp[2], down.GetName(), id)
	}
	if srv := spanAttr(down, "troupe.downstream.server"); srv != "rec" {
		t.Errorf("the downstream span names server %q, want rec", srv)
	}

	recv.mu.Lock()
	defer recv.mu.Unlock()
	for _, sp := range recv.spans {
		if text := sp.String(); strings.Contains(text, marker) || strings.Contains(text, "e2e-tenant") {
			t.Errorf("span %q carries an argument or the baggage: %s", sp.GetName(), text)
		}
	}
}
