package proxy

import (
	"context"
	"encoding/json"
	"testing"

	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"

	"troupe/downstream"
)

type namedServer struct{}

func (namedServer) Name() string { return "docs" }
func (namedServer) CallTool(context.Context, string, json.RawMessage, downstream.Observer) (json.RawMessage, error) {
	return nil, nil
}

// A forwarded call is a "downstream <server>" span below the call's, and
// the _meta it sends carries that span in place of the client's.
func TestDownstreamSpanAndMeta(t *testing.T) {
	tl := &tool{srv: namedServer{}, remote: "search"}
	clientMeta := json.RawMessage(`{"traceparent":"00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01","vendor/k":12345678901234567890}`)

	// Tracing off: nothing changes, not even the bytes.
	ctx := context.Background()
	c, span, meta := tl.startSpan(ctx, clientMeta)
	if c != ctx || span.IsRecording() || string(meta) != string(clientMeta) {
		t.Fatalf("tracing off: ctx changed %v, recording %v, meta %s", c != ctx, span.IsRecording(), meta)
	}

	rec := tracetest.NewSpanRecorder()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(rec))
	defer tp.Shutdown(context.Background())
	ctx, call := tp.Tracer("test").Start(ctx, "tools/call docs.search")
	for _, in := range []json.RawMessage{clientMeta, nil} {
		_, span, meta = tl.startSpan(ctx, in)
		span.End()
		var got map[string]json.RawMessage
		if err := json.Unmarshal(meta, &got); err != nil {
			t.Fatalf("meta %s: %v", meta, err)
		}
		want := `"00-` + call.SpanContext().TraceID().String() + "-" + span.SpanContext().SpanID().String() + `-01"`
		if string(got["traceparent"]) != want {
			t.Errorf("traceparent %s, want %s", got["traceparent"], want)
		}
		if in != nil && string(got["vendor/k"]) != "12345678901234567890" {
			t.Errorf("the client's other members changed: %s", meta)
		}
	}
	call.End()
	s := rec.Ended()[0]
	if s.Name() != "downstream docs" || s.SpanKind() != trace.SpanKindClient || s.Parent().SpanID() != call.SpanContext().SpanID() {
		t.Errorf("span %q kind %v parent %v", s.Name(), s.SpanKind(), s.Parent())
	}

	// A _meta that is not an object goes as it came (the request reports it).
	_, span, meta = tl.startSpan(ctx, json.RawMessage(`[1]`))
	span.End()
	if string(meta) != `[1]` {
		t.Errorf("meta %s", meta)
	}
}
