package e2e

import (
	"encoding/hex"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	coltracepb "go.opentelemetry.io/proto/otlp/collector/trace/v1"
	tracepb "go.opentelemetry.io/proto/otlp/trace/v1"
	"google.golang.org/protobuf/proto"
)

// otlpReceiver is an OpenTelemetry collector's OTLP/HTTP traces endpoint
// on 127.0.0.1, keeping the spans it receives.
type otlpReceiver struct {
	mu    sync.Mutex
	spans []*tracepb.Span
	// auth and services are each export's Authorization header and its
	// resources' service.name.
	auth, services []string
}

func (o *otlpReceiver) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	body, _ := io.ReadAll(r.Body)
	var req coltracepb.ExportTraceServiceRequest
	if r.URL.Path != "/v1/traces" || proto.Unmarshal(body, &req) != nil {
		http.Error(w, "not OTLP/HTTP traces", http.StatusBadRequest)
		return
	}
	o.mu.Lock()
	o.auth = append(o.auth, r.Header.Get("Authorization"))
	for _, rs := range req.GetResourceSpans() {
		for _, kv := range rs.GetResource().GetAttributes() {
			if kv.GetKey() == "service.name" {
				o.services = append(o.services, kv.GetValue().GetStringValue())
			}
		}
		for _, ss := range rs.GetScopeSpans() {
			o.spans = append(o.spans, ss.GetSpans()...)
		}
	}
	o.mu.Unlock()
	w.Header().Set("Content-Type", "application/x-protobuf")
	b, _ := proto.Marshal(&coltracepb.ExportTraceServiceResponse{})
	_, _ = w.Write(b)
}

// callSpan is the span of a call of tool in trace, nil until it arrives.
func (o *otlpReceiver) callSpan(trace, tool string) *tracepb.Span {
	o.mu.Lock()
	defer o.mu.Unlock()
	for _, s := range o.spans {
		if hex.EncodeToString(s.GetTraceId()) != trace {
			continue
		}
		for _, kv := range s.GetAttributes() {
			if strings.Contains(kv.GetKey(), "tool") && kv.GetValue().GetStringValue() == tool {
				return s
			}
		}
	}
	return nil
}

// TestTracesCarryTheClientsTraceID: with tracing.endpoint set, a call
// whose _meta carries a W3C traceparent reaches the collector as a span of
// the client's trace, a child of the client's span, with the tool and the
// correlation id as attributes and not the arguments, and with the
// sandbox's start as its child.
func TestTracesCarryTheClientsTraceID(t *testing.T) {
	recv := &otlpReceiver{}
	collector := httptest.NewServer(recv)
	defer collector.Close()
	config := filepath.Join(t.TempDir(), "config.toml")
	tables := fmt.Sprintf(`
[tracing]
endpoint = %q

[mcp.hello]
command = "echo"
args = ["hello"]
requires_approval = false
input_schema = '{"type": "object", "properties": {"secret_arg": {"type": "string"}}}'
`, collector.URL+"/v1/traces")
	if err := os.WriteFile(config, []byte(tables), 0o600); err != nil {
		t.Fatal(err)
	}
	fx := newFixture(t)
	srv := startHTTPServer(t, fx.dir, newToken(t), "--config", config)

	const (
		clientTrace = "4bf92f3577b34da6a3ce929d0e0e4736"
		clientSpan  = "00f067aa0ba902b7"
	)
	s := openSession(t, srv)
	msg := `{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"hello","arguments":{"secret_arg":"do-not-trace-me"},` +
		`"_meta":{"traceparent":"00-` + clientTrace + `-` + clientSpan + `-01","tracestate":"vendor=1"}}}`
	resp := s.post(t.Context(), t, msg)
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if !strings.Contains(string(body), "hello") {
		t.Fatalf("calling hello: %s %s", resp.Status, body)
	}
	s.end(t)

	// Spans go out in batches (every few seconds), and at exit.
	var span *tracepb.Span
	for deadline := time.Now().Add(20 * time.Second); span == nil; time.Sleep(100 * time.Millisecond) {
		if span = recv.callSpan(clientTrace, "hello"); span == nil && time.Now().After(deadline) {
			recv.mu.Lock()
			var got []string
			for _, sp := range recv.spans {
				got = append(got, fmt.Sprintf("%q trace %x attrs %v", sp.GetName(), sp.GetTraceId(), sp.GetAttributes()))
			}
			t.Fatalf("no span of the call in the client's trace among those received:\n%s", strings.Join(got, "\n"))
		}
	}
	if got := hex.EncodeToString(span.GetParentSpanId()); got != clientSpan {
		t.Errorf("the call's span has parent %s, want the client's span %s", got, clientSpan)
	}
	attrs := map[string]string{}
	for _, kv := range span.GetAttributes() {
		attrs[kv.GetKey()] = kv.GetValue().GetStringValue()
	}
	if !strings.HasPrefix(attrs["troupe.correlation_id"], "c-") {
		t.Errorf("the call's span attributes %v: want troupe.correlation_id", attrs)
	}
	recv.mu.Lock()
	defer recv.mu.Unlock()
	sandboxChild := false
	for _, sp := range recv.spans {
		if strings.Contains(sp.String(), "do-not-trace-me") {
			t.Errorf("span %q carries the call's arguments", sp.GetName())
		}
		sandboxChild = sandboxChild || sp.GetName() == "sandbox.start" && string(sp.GetParentSpanId()) == string(span.GetSpanId())
	}
	if !sandboxChild {
		t.Error("no sandbox.start span is a child of the call's")
	}
}

// callTraced makes one call of hello over srv with a traceparent of trace
// and waits for its span at the receiver.
func callTraced(t *testing.T, srv *httpServer, recv *otlpReceiver, trace string) {
	t.Helper()
	s := openSession(t, srv)
	msg := `{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"hello","arguments":{},` +
		`"_meta":{"traceparent":"00-` + trace + `-00f067aa0ba902b7-01"}}}`
	resp := s.post(t.Context(), t, msg)
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if !strings.Contains(string(body), "hello") {
		t.Fatalf("calling hello: %s %s", resp.Status, body)
	}
	s.end(t)
	for deadline := time.Now().Add(20 * time.Second); recv.callSpan(trace, "hello") == nil; time.Sleep(100 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("the call's span never reached the collector; troupe's log:\n%s", srv.log)
		}
	}
}

// helloTool is a command tool the tracing tests call.
const helloTool = `
[mcp.hello]
command = "echo"
args = ["hello"]
requires_approval = false
`

// TestTracingEndpointWithoutPath: tracing.endpoint written as the
// collector's base URL (http://collector:4318, the form
// OTEL_EXPORTER_OTLP_ENDPOINT takes) sends to its /v1/traces. Before, the
// spans were posted to "/" and lost.
func TestTracingEndpointWithoutPath(t *testing.T) {
	recv := &otlpReceiver{}
	collector := httptest.NewServer(recv)
	defer collector.Close()
	config := filepath.Join(t.TempDir(), "config.toml")
	if err := os.WriteFile(config, []byte(fmt.Sprintf("[tracing]\nendpoint = %q\n", collector.URL)+helloTool), 0o600); err != nil {
		t.Fatal(err)
	}
	srv := startHTTPServer(t, newFixture(t).dir, newToken(t), "--config", config)
	callTraced(t, srv, recv, "4bf92f3577b34da6a3ce929d0e0e4701")
	if !srv.waitLog("endpoint="+collector.URL+"/v1/traces", time.Second) {
		t.Errorf("the log does not say where spans go:\n%s", srv.log)
	}
}

// TestTracingFromOTELVariables: with no [tracing] table, the standard
// variables turn tracing on: OTEL_EXPORTER_OTLP_ENDPOINT (the base URL),
// OTEL_EXPORTER_OTLP_HEADERS (sent with every export) and
// OTEL_SERVICE_NAME (the resource's service.name). Before, troupe ignored
// them and sent nothing.
func TestTracingFromOTELVariables(t *testing.T) {
	recv := &otlpReceiver{}
	collector := httptest.NewServer(recv)
	defer collector.Close()
	config := filepath.Join(t.TempDir(), "config.toml")
	if err := os.WriteFile(config, []byte(helloTool), 0o600); err != nil {
		t.Fatal(err)
	}
	// The server inherits the test's environment (t.Setenv: no parallel
	// test sees it).
	t.Setenv("OTEL_EXPORTER_OTLP_ENDPOINT", collector.URL)
	t.Setenv("OTEL_EXPORTER_OTLP_HEADERS", "authorization=Bearer%20collector-token")
	t.Setenv("OTEL_SERVICE_NAME", "troupe-ci")
	srv := startHTTPServer(t, newFixture(t).dir, newToken(t), "--config", config)
	callTraced(t, srv, recv, "4bf92f3577b34da6a3ce929d0e0e4702")
	recv.mu.Lock()
	defer recv.mu.Unlock()
	if len(recv.auth) == 0 || recv.auth[0] != "Bearer collector-token" {
		t.Errorf("exports carried Authorization %q, want the OTEL_EXPORTER_OTLP_HEADERS one", recv.auth)
	}
	if len(recv.services) == 0 || recv.services[0] != "troupe-ci" {
		t.Errorf("service.name %q, want OTEL_SERVICE_NAME's troupe-ci", recv.services)
	}
}
