package tracing

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/baggage"
	"go.opentelemetry.io/otel/codes"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"
	coltracepb "go.opentelemetry.io/proto/otlp/collector/trace/v1"
	"google.golang.org/protobuf/proto"
)

// The client's span of the tests: W3C's own example ids.
const (
	clientTrace = "4bf92f3577b34da6a3ce929d0e0e4736"
	clientSpan  = "00f067aa0ba902b7"
	traceparent = "00-" + clientTrace + "-" + clientSpan + "-01"
)

// recording returns a Tracer whose spans end up in the returned recorder,
// synchronously: the same Tracer as New's, minus the exporter.
func recording(t *testing.T) (*Tracer, *tracetest.SpanRecorder) {
	t.Helper()
	rec := tracetest.NewSpanRecorder()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(rec))
	t.Cleanup(func() { _ = tp.Shutdown(context.Background()) })
	return &Tracer{provider: tp, tracer: tp.Tracer(InstrumentationName), exporter: &loggingExporter{}}, rec
}

func attrs(s sdktrace.ReadOnlySpan) map[attribute.Key]string {
	m := map[attribute.Key]string{}
	for _, kv := range s.Attributes() {
		m[kv.Key] = kv.Value.Emit()
	}
	return m
}

func TestStartCallParentFromMeta(t *testing.T) {
	tr, rec := recording(t)
	meta := json.RawMessage(`{"progressToken":7,"traceparent":"` + traceparent + `","tracestate":"vendor=v1"}`)
	ctx, span := tr.StartCall(context.Background(), meta, "shell.exec", "c-123", "s-9")
	if got := trace.SpanFromContext(ctx); got != span {
		t.Fatal("the returned context does not hold the call's span")
	}
	span.End()
	ended := rec.Ended()
	if len(ended) != 1 {
		t.Fatalf("%d spans ended, want 1", len(ended))
	}
	s := ended[0]
	if s.Name() != "tools/call shell.exec" {
		t.Errorf("name %q", s.Name())
	}
	if s.SpanKind() != trace.SpanKindServer {
		t.Errorf("kind %v, want server", s.SpanKind())
	}
	if got := s.SpanContext().TraceID().String(); got != clientTrace {
		t.Errorf("trace id %s, want the client's %s", got, clientTrace)
	}
	if got := s.Parent().SpanID().String(); got != clientSpan || !s.Parent().IsRemote() {
		t.Errorf("parent %s (remote %v), want the client's span %s", got, s.Parent().IsRemote(), clientSpan)
	}
	if got := s.SpanContext().TraceState().Get("vendor"); got != "v1" {
		t.Errorf("tracestate vendor=%q, want v1", got)
	}
	want := map[attribute.Key]string{
		"troupe.correlation_id": "c-123",
		"gen_ai.tool.name":      "shell.exec",
		"mcp.session.id":        "s-9",
		"mcp.method.name":       "tools/call",
	}
	got := attrs(s)
	for k, v := range want {
		if got[k] != v {
			t.Errorf("attribute %s = %q, want %q", k, got[k], v)
		}
	}
}

func TestStartCallWithoutParentStartsRoot(t *testing.T) {
	metas := map[string]string{
		"none":                 ``,
		"null":                 `null`,
		"not an object":        `[1,2]`,
		"not JSON":             `{"traceparent":`,
		"malformed":            `{"traceparent":"00-zz-yy-01"}`,
		"all-zero trace id":    `{"traceparent":"00-00000000000000000000000000000000-` + clientSpan + `-01"}`,
		"not a string":         `{"traceparent":42}`,
		"other spelling":       `{"TraceParent":"` + traceparent + `"}`,
		"unknown version ff":   `{"traceparent":"ff-` + clientTrace + `-` + clientSpan + `-01"}`,
		"tracestate, no trace": `{"tracestate":"vendor=v1"}`,
	}
	for name, meta := range metas {
		t.Run(name, func(t *testing.T) {
			tr, rec := recording(t)
			// A span already in ctx must not become the parent either.
			outer := tr.StartSpan(context.Background(), "outer", time.Time{})
			parentCtx := trace.ContextWithSpan(context.Background(), outer)
			_, span := tr.StartCall(parentCtx, json.RawMessage(meta), "repo.search", "c-1", "s-1")
			span.End()
			outer.End()
			s := rec.Ended()[0]
			if s.Parent().IsValid() {
				t.Errorf("parent %v, want a root span", s.Parent())
			}
			if !s.SpanContext().IsValid() || s.SpanContext().TraceID().String() == clientTrace {
				t.Errorf("trace id %s, want a new one", s.SpanContext().TraceID())
			}
		})
	}
}

func TestInjectMetaRoundTrip(t *testing.T) {
	tr, rec := recording(t)
	meta := json.RawMessage(`{"traceparent":"` + traceparent + `","tracestate":"vendor=v1","baggage":"tenant=acme"}`)
	ctx, call := tr.StartCall(context.Background(), meta, "docs.fetch", "c-7", "s-7")
	if m := baggage.FromContext(ctx).Member("tenant"); m.Value() != "acme" {
		t.Errorf("baggage tenant=%q in the call's context, want acme", m.Value())
	}
	dctx, down := Child(ctx, "downstream docs", trace.SpanKindClient)
	out := map[string]any{"progressToken": "p1", "traceparent": "stale"}
	InjectMeta(dctx, out)
	want := "00-" + clientTrace + "-" + down.SpanContext().SpanID().String() + "-01"
	if out["traceparent"] != want {
		t.Errorf("traceparent %v, want %s", out["traceparent"], want)
	}
	if out["tracestate"] != "vendor=v1" || out["baggage"] != "tenant=acme" || out["progressToken"] != "p1" {
		t.Errorf("meta %v: tracestate, baggage or the other members lost", out)
	}
	// The downstream server, troupe again, continues the trace.
	raw, _ := json.Marshal(out)
	_, next := tr.StartCall(context.Background(), raw, "x", "c-8", "s-8")
	next.End()
	down.End()
	call.End()
	var nextSpan sdktrace.ReadOnlySpan
	for _, s := range rec.Ended() {
		if s.Name() == "tools/call x" {
			nextSpan = s
		}
	}
	if nextSpan.Parent().SpanID() != down.SpanContext().SpanID() || nextSpan.SpanContext().TraceID().String() != clientTrace {
		t.Errorf("the next hop's parent %v, want the downstream span %v", nextSpan.Parent(), down.SpanContext())
	}

	// Without a span, InjectMeta writes nothing; a nil map is left alone.
	empty := map[string]any{}
	InjectMeta(context.Background(), empty)
	InjectMeta(dctx, nil)
	if len(empty) != 0 {
		t.Errorf("InjectMeta without a span wrote %v", empty)
	}
}

func TestStartSpanChildAndStart(t *testing.T) {
	tr, rec := recording(t)
	ctx, call := tr.StartCall(context.Background(), nil, "shell.exec", "c-1", "s-1")
	began := time.Now().Add(-3 * time.Second)
	approval := tr.StartSpan(ctx, "approval", began, attribute.String("troupe.approval.outcome", "approved"))
	approval.End()
	call.End()
	root := tr.StartSpan(context.Background(), "tools/list", time.Time{})
	root.End()
	spans := rec.Ended()
	a := spans[0]
	if a.Name() != "approval" || a.Parent().SpanID() != call.SpanContext().SpanID() {
		t.Errorf("approval %q, parent %v: want a child of the call", a.Name(), a.Parent())
	}
	if !a.StartTime().Equal(began) {
		t.Errorf("approval started %v, want %v", a.StartTime(), began)
	}
	if attrs(a)["troupe.approval.outcome"] != "approved" {
		t.Errorf("attributes %v", attrs(a))
	}
	if r := spans[2]; r.Parent().IsValid() || r.StartTime().IsZero() {
		t.Errorf("tools/list: parent %v, start %v: want a root started now", r.Parent(), r.StartTime())
	}
}

func TestChildAndFail(t *testing.T) {
	// Tracing off: no span in ctx, no span made.
	ctx := context.Background()
	if c, s := Child(ctx, "sandbox.start", trace.SpanKindInternal); c != ctx || s.IsRecording() {
		t.Error("Child without a span in ctx made one")
	}
	tr, rec := recording(t)
	ctx, call := tr.StartCall(ctx, nil, "shell.exec", "c-1", "s-1")
	_, s := Child(ctx, "sandbox.start", trace.SpanKindInternal, SandboxProfileKey.String("default"))
	Fail(s, errors.New("/secret/path: denied"), "the sandbox could not start the process", "landlock")
	s.End()
	call.End()
	got := rec.Ended()[0]
	if got.Parent().SpanID() != call.SpanContext().SpanID() {
		t.Errorf("parent %v, want the call", got.Parent())
	}
	if got.Status().Code != codes.Error || strings.Contains(got.Status().Description, "/secret") {
		t.Errorf("status %+v: want an error without the message", got.Status())
	}
	if a := attrs(got); a["error.type"] != "landlock" || a["troupe.sandbox.profile"] != "default" {
		t.Errorf("attributes %v", a)
	}
}

func TestNilTracerIsOff(t *testing.T) {
	var tr *Tracer
	ctx := context.Background()
	c, span := tr.StartCall(ctx, json.RawMessage(`{"traceparent":"`+traceparent+`"}`), "t", "c", "s")
	if c != ctx || span.IsRecording() || span.SpanContext().IsValid() {
		t.Error("a nil Tracer made a span")
	}
	span.End()
	if s := tr.StartSpan(ctx, "approval", time.Now()); s.IsRecording() {
		t.Error("a nil Tracer's StartSpan records")
	}
	if err := tr.Shutdown(ctx); err != nil {
		t.Errorf("Shutdown: %v", err)
	}
	meta := map[string]any{}
	InjectMeta(c, meta)
	if len(meta) != 0 {
		t.Errorf("InjectMeta with tracing off wrote %v", meta)
	}
}

// noEnv is an environment without OTEL_* variables.
func noEnv(string) string { return "" }

func TestNewEndpoint(t *testing.T) {
	tr, err := New(Options{Getenv: noEnv})
	if tr != nil || err != nil {
		t.Fatalf("New with no endpoint: %v, %v; want tracing off", tr, err)
	}
	for _, bad := range []string{"127.0.0.1:4318", "grpc://127.0.0.1:4317", "http://", "http://user:hunter2@[::1", "https://user:hunter2@collector/v1/traces"} {
		_, err := New(Options{Endpoint: bad, Getenv: noEnv})
		if err == nil {
			t.Errorf("New(%q) accepted it", bad)
		} else if strings.Contains(err.Error(), "hunter2") {
			t.Errorf("New(%q): the error shows the password: %v", bad, err)
		}
	}
}

// collector is an OTLP/HTTP traces receiver.
type collector struct {
	mu   sync.Mutex
	reqs []*coltracepb.ExportTraceServiceRequest
}

func (c *collector) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	body, _ := io.ReadAll(r.Body)
	if r.URL.Path != "/v1/traces" || r.Header.Get("Content-Type") != "application/x-protobuf" {
		http.Error(w, "not OTLP/HTTP traces", http.StatusBadRequest)
		return
	}
	var req coltracepb.ExportTraceServiceRequest
	if err := proto.Unmarshal(body, &req); err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	c.mu.Lock()
	c.reqs = append(c.reqs, &req)
	c.mu.Unlock()
	w.Header().Set("Content-Type", "application/x-protobuf")
	b, _ := proto.Marshal(&coltracepb.ExportTraceServiceResponse{})
	_, _ = w.Write(b)
}

func TestExportOverOTLPHTTP(t *testing.T) {
	col := &collector{}
	srv := httptest.NewServer(col)
	defer srv.Close()
	tr, err := New(Options{Endpoint: srv.URL + "/v1/traces", ServiceVersion: "1.2.3"})
	if err != nil {
		t.Fatal(err)
	}
	meta := json.RawMessage(`{"traceparent":"` + traceparent + `"}`)
	_, span := tr.StartCall(context.Background(), meta, "shell.exec", "c-42", "s-1")
	span.End()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := tr.Shutdown(ctx); err != nil {
		t.Fatalf("Shutdown: %v", err)
	}
	col.mu.Lock()
	defer col.mu.Unlock()
	if len(col.reqs) == 0 {
		t.Fatal("the collector received nothing")
	}
	rs := col.reqs[0].ResourceSpans[0]
	res := map[string]string{}
	for _, kv := range rs.Resource.Attributes {
		res[kv.Key] = kv.Value.GetStringValue()
	}
	if res["service.name"] != "troupe" || res["service.version"] != "1.2.3" {
		t.Errorf("resource %v", res)
	}
	ss := rs.ScopeSpans[0]
	if ss.Scope.Name != InstrumentationName {
		t.Errorf("scope %q", ss.Scope.Name)
	}
	s := ss.Spans[0]
	if s.Name != "tools/call shell.exec" || trace.TraceID(s.TraceId).String() != clientTrace ||
		trace.SpanID(s.ParentSpanId).String() != clientSpan {
		t.Errorf("span %q trace %x parent %x", s.Name, s.TraceId, s.ParentSpanId)
	}
}

func TestShutdownReportsUnsentSpans(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close() // nothing listens there now
	tr, err := New(Options{Endpoint: "http://" + addr + "/v1/traces"})
	if err != nil {
		t.Fatal(err)
	}
	_, span := tr.StartCall(context.Background(), nil, "t", "c-1", "s-1")
	span.End()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	began := time.Now()
	if err := tr.Shutdown(ctx); err == nil {
		t.Error("Shutdown with the collector down reported nothing")
	}
	if took := time.Since(began); took > 5*time.Second {
		t.Errorf("Shutdown took %v past its deadline", took)
	}
}

func BenchmarkNilTracerCall(b *testing.B) {
	var tr *Tracer
	ctx := context.Background()
	meta := json.RawMessage(`{"traceparent":"` + traceparent + `"}`)
	b.ReportAllocs()
	for b.Loop() {
		c, span := tr.StartCall(ctx, meta, "shell.exec", "c-1", "s-1")
		_, child := Child(c, "sandbox.start", trace.SpanKindInternal)
		child.End()
		span.End()
	}
}

// TestResolveEndpoint: a URL without a path (as OTEL_EXPORTER_OTLP_ENDPOINT
// takes it) sends to /v1/traces; the standard variables apply when
// tracing.endpoint is not set, and it wins over them. Before, the
// variables were ignored and http://collector:4318 posted to "/", where a
// collector takes nothing.
func TestResolveEndpoint(t *testing.T) {
	env := func(vars map[string]string) func(string) string {
		return func(k string) string { return vars[k] }
	}
	for _, c := range []struct {
		configured string
		vars       map[string]string
		want, from string
	}{
		{"http://collector:4318", nil, "http://collector:4318/v1/traces", "tracing.endpoint"},
		{"http://collector:4318/", nil, "http://collector:4318/v1/traces", "tracing.endpoint"},
		{"https://collector/otlp/v1/traces", nil, "https://collector/otlp/v1/traces", "tracing.endpoint"},
		{"http://config:4318", map[string]string{EnvEndpoint: "http://env:4318"}, "http://config:4318/v1/traces", "tracing.endpoint"},
		{"", map[string]string{EnvEndpoint: "http://env:4318"}, "http://env:4318/v1/traces", EnvEndpoint},
		{"", map[string]string{EnvEndpoint: "http://env:4318/prefix/"}, "http://env:4318/prefix/v1/traces", EnvEndpoint},
		{"", map[string]string{EnvEndpoint: "http://env:4318", EnvTracesEndpoint: "http://traces:4318/custom"},
			"http://traces:4318/custom", EnvTracesEndpoint},
		{"", nil, "", ""},
	} {
		got, from := ResolveEndpoint(c.configured, env(c.vars))
		if got != c.want || from != c.from {
			t.Errorf("ResolveEndpoint(%q, %v) = %q from %q; want %q from %q", c.configured, c.vars, got, from, c.want, c.from)
		}
	}
}

// TestExportFailureLoggedOnce: a collector that refuses every batch is one
// warning with the reason, not one a batch; sending again is said once,
// and a new failure warns again. Before, every batch logged a warning.
func TestExportFailureLoggedOnce(t *testing.T) {
	var refuse sync.Mutex // held: the collector answers 404
	col := &collector{}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if !refuse.TryLock() {
			http.NotFound(w, r)
			return
		}
		refuse.Unlock()
		col.ServeHTTP(w, r)
	}))
	defer srv.Close()
	var logs strings.Builder
	var logMu sync.Mutex
	log := slog.New(slog.NewTextHandler(lockedWriter{&logMu, &logs}, &slog.HandlerOptions{Level: slog.LevelInfo}))
	tr, err := New(Options{Endpoint: srv.URL + "/v1/traces", Logger: log, Getenv: noEnv})
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = tr.Shutdown(context.Background()) }()
	spans := tracetest.SpanStubs{{Name: "a"}}.Snapshots()
	ctx := context.Background()
	export := func() {
		if err := tr.exporter.ExportSpans(ctx, spans); err != nil {
			t.Fatal(err)
		}
	}
	count := func(s string) int {
		logMu.Lock()
		defer logMu.Unlock()
		return strings.Count(logs.String(), s)
	}
	refuse.Lock()
	for range 3 {
		export()
	}
	if n := count("spans not sent"); n != 1 || !strings.Contains(logs.String(), "404") || !strings.Contains(logs.String(), "/v1/traces") {
		t.Fatalf("3 refused batches logged %d warnings, want 1 with the reason and a hint:\n%s", n, logs.String())
	}
	refuse.Unlock()
	export()
	export()
	if n := count("takes spans again"); n != 1 || !strings.Contains(logs.String(), "spans_lost=3") {
		t.Fatalf("recovery logged %d times, want once with the spans lost:\n%s", n, logs.String())
	}
	refuse.Lock()
	export()
	refuse.Unlock()
	if n := count("spans not sent"); n != 2 {
		t.Fatalf("a new failure after recovery: %d warnings in all, want 2:\n%s", n, logs.String())
	}
}

// lockedWriter serialises writes to a builder the test reads.
type lockedWriter struct {
	mu *sync.Mutex
	b  *strings.Builder
}

func (w lockedWriter) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.b.Write(p)
}
