package observe

import (
	"context"
	"encoding/hex"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"
	"time"

	oteltrace "go.opentelemetry.io/otel/trace"
	coltracepb "go.opentelemetry.io/proto/otlp/collector/trace/v1"
	tracepb "go.opentelemetry.io/proto/otlp/trace/v1"
	"google.golang.org/protobuf/proto"

	"troupe/actors"
	"troupe/audit"
	"troupe/observe/tracing"
)

// receiver is an OTLP/HTTP traces endpoint that keeps the spans it gets.
type receiver struct {
	mu    sync.Mutex
	spans []*tracepb.Span
}

func (rc *receiver) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	body, err := io.ReadAll(r.Body)
	var req coltracepb.ExportTraceServiceRequest
	if err == nil {
		err = proto.Unmarshal(body, &req)
	}
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	rc.mu.Lock()
	for _, rs := range req.GetResourceSpans() {
		for _, ss := range rs.GetScopeSpans() {
			rc.spans = append(rc.spans, ss.GetSpans()...)
		}
	}
	rc.mu.Unlock()
	w.Header().Set("Content-Type", "application/x-protobuf")
	_, _ = w.Write(nil)
}

func (rc *receiver) byName() map[string]*tracepb.Span {
	rc.mu.Lock()
	defer rc.mu.Unlock()
	m := map[string]*tracepb.Span{}
	for _, s := range rc.spans {
		m[s.GetName()] = s
	}
	return m
}

func attr(s *tracepb.Span, key string) (string, bool) {
	for _, kv := range s.GetAttributes() {
		if kv.GetKey() == key {
			return kv.GetValue().GetStringValue(), true
		}
	}
	return "", false
}

func TestTracingSpans(t *testing.T) {
	rc := &receiver{}
	srv := httptest.NewServer(rc)
	defer srv.Close()
	tr, err := tracing.New(tracing.Options{Endpoint: srv.URL + "/v1/traces", ServiceVersion: "test"})
	if err != nil {
		t.Fatal(err)
	}
	h := New(Options{Tracer: tr})
	h.SetTools(testTools())

	const clientTrace = "4bf92f3577b34da6a3ce929d0e0e4736"
	meta, _ := json.Marshal(map[string]string{"traceparent": "00-" + clientTrace + "-00f067aa0ba902b7-01"})
	c := &actors.CallView{ID: "c-1", Session: "s1", Identity: "token:ci", Tool: "shell", Version: "2025-06-18", Started: time.Now(), Meta: meta}
	ctx := h.CallStarted(context.Background(), c)
	if sc := spanContext(ctx); sc != clientTrace {
		t.Errorf("the tool's context is in trace %s, want the client's %s", sc, clientTrace)
	}
	h.CallStateChanged(c, actors.CallWaitingApproval)
	h.ApprovalDecided(c, "approved", 20*time.Millisecond)
	h.CallStateChanged(c, actors.CallRunning)
	h.CallFinished(c, &audit.Record{Tool: "shell", Outcome: "deadline_exceeded", Started: c.Started, Stopped: time.Now()})

	c2 := &actors.CallView{ID: "c-2", Session: "s1", Tool: "read_file", Started: time.Now()}
	h.CallStarted(context.Background(), c2)
	h.CallFinished(c2, &audit.Record{Tool: "read_file", Outcome: "ok"})
	h.RequestServed("s1", "tools/list", time.Now().Add(-time.Millisecond))

	shutdown, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := tr.Shutdown(shutdown); err != nil {
		t.Fatal(err)
	}
	spans := rc.byName()
	call, approval, ok2, list := spans["tools/call shell"], spans["approval"], spans["tools/call read_file"], spans["tools/list"]
	if call == nil || approval == nil || ok2 == nil || list == nil {
		t.Fatalf("spans received: %v", keys(spans))
	}
	if got := hex.EncodeToString(call.GetTraceId()); got != clientTrace {
		t.Errorf("call span in trace %s, want the client's %s", got, clientTrace)
	}
	if got := hex.EncodeToString(call.GetParentSpanId()); got != "00f067aa0ba902b7" {
		t.Errorf("call span's parent = %s, want the client's span", got)
	}
	if string(approval.GetParentSpanId()) != string(call.GetSpanId()) || string(approval.GetTraceId()) != string(call.GetTraceId()) {
		t.Error("the approval span is not the call span's child")
	}
	if d := approval.GetEndTimeUnixNano() - approval.GetStartTimeUnixNano(); d < uint64(20*time.Millisecond) {
		t.Errorf("approval span lasted %v, want the 20ms wait", time.Duration(d))
	}
	if v, _ := attr(approval, "troupe.outcome"); v != "approved" {
		t.Errorf("approval outcome attribute = %q", v)
	}
	if call.GetStatus().GetCode() != tracepb.Status_STATUS_CODE_ERROR {
		t.Errorf("failed call's span status = %v", call.GetStatus())
	}
	if v, _ := attr(call, "troupe.outcome"); v != "deadline_exceeded" {
		t.Errorf("call outcome attribute = %q", v)
	}
	if v, _ := attr(call, "troupe.correlation_id"); v != "c-1" {
		t.Errorf("call correlation id attribute = %q", v)
	}
	if v, _ := attr(call, "troupe.identity"); v != "token:ci" {
		t.Errorf("call identity attribute = %q", v)
	}
	if ok2.GetStatus().GetCode() == tracepb.Status_STATUS_CODE_ERROR {
		t.Error("an ok call's span failed")
	}
	if len(ok2.GetParentSpanId()) != 0 {
		t.Error("a call without trace context in _meta is not a root span")
	}
	if v, _ := attr(list, "mcp.session.id"); v != "s1" {
		t.Errorf("request span session = %q", v)
	}
}

// spanContext is the trace id of ctx's span, "" when it has none.
func spanContext(ctx context.Context) string {
	sc := oteltrace.SpanContextFromContext(ctx)
	if !sc.IsValid() {
		return ""
	}
	return sc.TraceID().String()
}

func keys(m map[string]*tracepb.Span) []string {
	var out []string
	for k := range m {
		out = append(out, k)
	}
	return out
}
