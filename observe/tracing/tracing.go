// Package tracing gives troupe's calls OpenTelemetry traces, sent over
// OTLP/HTTP to the collector an operator names (tracing.endpoint, else the
// standard OTEL_EXPORTER_OTLP_*ENDPOINT variables: ResolveEndpoint), and
// off by default.
//
// A trace crosses process boundaries through a request's _meta: SEP-414
// reserves its members "traceparent", "tracestate" (W3C Trace Context) and
// "baggage" (W3C Baggage) for the caller's span. A client that sends them
// makes troupe's span of the call a child of its own, and troupe does the
// same for the MCP servers it proxies (InjectMeta), so one trace shows an
// agent's request, troupe's approval wait and sandbox start, and the
// downstream server's work.
//
// The spans troupe makes:
//
//	tools/call <tool>      one per call (StartCall), a server span
//	approval               the wait for a person's answer (StartSpan)
//	sandbox.start          starting a sandboxed process (tools/command, tools/repo)
//	downstream <server>    a proxied call to a downstream MCP server (tools/proxy)
//	<method>               any other request (initialize, tools/list, …)
//
// Their attributes name the call, never its arguments: the correlation id
// (troupe.correlation_id, the c-… of logs and audit), the tool
// (gen_ai.tool.name) and the session (mcp.session.id), the names OpenTelemetry's
// semantic conventions give MCP.
//
// A Tracer owns its TracerProvider: nothing here touches OpenTelemetry's
// global state (otel.SetTracerProvider), so two Hosts in one process (the
// tests) never see each other's spans. Code below a call reaches the
// provider through the call's span: trace.SpanFromContext(ctx).
// TracerProvider().Tracer(...). With tracing off that span is a no-op one
// whose provider makes no-op spans, and the whole path costs a context
// lookup.
package tracing

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"net/url"
	"os"
	"strings"
	"sync/atomic"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/baggage"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracehttp"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/sdk/resource"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	semconv "go.opentelemetry.io/otel/semconv/v1.41.0"
	"go.opentelemetry.io/otel/trace"
)

// InstrumentationName names troupe's tracer (the instrumentation scope of
// every span troupe makes); code below a call asks its span's provider for
// the tracer of this name.
const InstrumentationName = "troupe"

// The attribute keys troupe puts on its spans. The MCP and GenAI names are
// those of OpenTelemetry's semantic conventions (semconv v1.41), so a
// tracing backend that knows MCP shows them as such.
const (
	// CorrelationIDKey is the call's correlation id (c-…), the key that
	// joins a span to troupe's logs, errors and audit records.
	CorrelationIDKey = attribute.Key("troupe.correlation_id")
	// ToolNameKey is the tool the client called.
	ToolNameKey = semconv.GenAIToolNameKey
	// SessionIDKey is the MCP session the call came in.
	SessionIDKey = semconv.McpSessionIDKey
	// MethodNameKey is the JSON-RPC method of the request.
	MethodNameKey = semconv.McpMethodNameKey
	// DownstreamServerKey names the downstream MCP server of a proxied
	// call.
	DownstreamServerKey = attribute.Key("troupe.downstream.server")
	// SandboxProfileKey names the sandbox profile a process started in.
	SandboxProfileKey = attribute.Key("troupe.sandbox.profile")
)

// The _meta members that carry a trace across an MCP request (SEP-414):
// they hold the W3C traceparent, tracestate and baggage header values.
const (
	metaTraceparent = "traceparent"
	metaTracestate  = "tracestate"
	metaBaggage     = "baggage"
)

// maxSpanNameTool bounds the tool name in a span's name: the name comes
// from the client, and a backend indexes span names.
const maxSpanNameTool = 128

// exportTimeout bounds one export to the collector, and retryElapsed the
// retries of one batch: an unreachable collector must not hold troupe's
// exit (Shutdown) for the exporter's default minute.
const (
	exportTimeout = 5 * time.Second
	retryElapsed  = 10 * time.Second
)

// The standard OpenTelemetry variables troupe reads, besides those the
// OTLP exporter reads itself (OTEL_EXPORTER_OTLP_HEADERS and
// OTEL_EXPORTER_OTLP_TRACES_HEADERS, _CERTIFICATE, _COMPRESSION) and the
// resource's (OTEL_SERVICE_NAME, OTEL_RESOURCE_ATTRIBUTES).
const (
	// EnvTracesEndpoint is the traces URL, used as it is written (the
	// specification's rule for a signal's own variable).
	EnvTracesEndpoint = "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT"
	// EnvEndpoint is the collector's base URL; traces go to its
	// /v1/traces.
	EnvEndpoint = "OTEL_EXPORTER_OTLP_ENDPOINT"
)

// tracesPath is where an OTLP/HTTP collector takes traces.
const tracesPath = "/v1/traces"

// ResolveEndpoint says where traces go and which setting said so:
// tracing.endpoint (configured) when set, as explicit configuration beats
// the environment in OpenTelemetry's specification; else
// OTEL_EXPORTER_OTLP_TRACES_ENDPOINT as written; else
// OTEL_EXPORTER_OTLP_ENDPOINT with /v1/traces appended to its path. A
// configured URL without a path (http://collector:4318, the form
// OTEL_EXPORTER_OTLP_ENDPOINT takes and most people write) gets /v1/traces
// too: the collector's root takes nothing, and spans sent there are lost.
// ("", "") means tracing off. getenv nil means os.Getenv.
func ResolveEndpoint(configured string, getenv func(string) string) (endpoint, from string) {
	if getenv == nil {
		getenv = os.Getenv
	}
	switch {
	case configured != "":
		u, err := url.Parse(configured)
		if err == nil && u.Host != "" && (u.Path == "" || u.Path == "/") {
			u.Path = tracesPath
			return u.String(), "tracing.endpoint"
		}
		return configured, "tracing.endpoint"
	case getenv(EnvTracesEndpoint) != "":
		return getenv(EnvTracesEndpoint), EnvTracesEndpoint
	case getenv(EnvEndpoint) != "":
		base := getenv(EnvEndpoint)
		u, err := url.Parse(base)
		if err != nil {
			return base, EnvEndpoint // New says what is wrong with it
		}
		u.Path = strings.TrimSuffix(u.Path, "/") + tracesPath
		return u.String(), EnvEndpoint
	}
	return "", ""
}

// Options configures a Tracer.
type Options struct {
	// Endpoint is tracing.endpoint: the collector's OTLP/HTTP traces URL,
	// e.g. http://127.0.0.1:4318/v1/traces, or its base URL
	// (http://127.0.0.1:4318), to which /v1/traces is added. http:// sends
	// in the clear, https:// over TLS (the system's roots). "" means the
	// standard variables decide (ResolveEndpoint); with none set, tracing
	// is off: New returns a nil Tracer. A collector that wants a token gets
	// it from the standard OTEL_EXPORTER_OTLP_HEADERS (or _TRACES_HEADERS)
	// environment variable, never from the URL or troupe's config.
	Endpoint string
	// Getenv reads the OTEL_* variables; nil means os.Getenv.
	Getenv func(string) string
	// ServiceVersion is troupe's version, the resource's service.version.
	ServiceVersion string
	// Logger receives export failures (the collector down, refusing);
	// nil discards them.
	Logger *slog.Logger
}

// Tracer makes troupe's spans and sends them to the collector in batches.
// A nil *Tracer is tracing off: its methods return their context and a
// non-recording span, at the cost of a nil check.
type Tracer struct {
	provider *sdktrace.TracerProvider
	tracer   trace.Tracer
	exporter *loggingExporter
}

// New starts tracing to the endpoint ResolveEndpoint picks; with none it
// returns (nil, nil), tracing off. Nothing is sent until the first batch of
// spans is complete, so a collector that is down shows in the log, not
// here.
func New(opts Options) (*Tracer, error) {
	endpoint, from := ResolveEndpoint(opts.Endpoint, opts.Getenv)
	if endpoint == "" {
		return nil, nil
	}
	u, err := url.Parse(endpoint)
	if err != nil {
		return nil, fmt.Errorf("%s: not a URL", from)
	}
	if u.Scheme != "http" && u.Scheme != "https" {
		return nil, fmt.Errorf("%s %s: the scheme must be http or https (OTLP/HTTP)", from, u.Redacted())
	}
	if u.Host == "" {
		return nil, fmt.Errorf("%s %s: no host", from, u.Redacted())
	}
	if u.User != nil { // the exporter would drop them silently
		return nil, fmt.Errorf("%s %s: credentials in the URL are not sent; set OTEL_EXPORTER_OTLP_HEADERS", from, u.Redacted())
	}
	// The URL is given explicitly, so the exporter's own reading of the
	// endpoint variables (which would agree) never applies; it still
	// reads the headers, certificate and compression variables.
	exp, err := otlptracehttp.New(context.Background(),
		otlptracehttp.WithEndpointURL(endpoint),
		otlptracehttp.WithTimeout(exportTimeout),
		otlptracehttp.WithRetry(otlptracehttp.RetryConfig{
			Enabled:         true,
			InitialInterval: 500 * time.Millisecond,
			MaxInterval:     2 * time.Second,
			MaxElapsedTime:  retryElapsed,
		}),
	)
	if err != nil {
		return nil, fmt.Errorf("%s %s: the OTLP exporter: %w", from, u.Redacted(), err)
	}
	logger := opts.Logger
	if logger == nil {
		logger = slog.New(slog.DiscardHandler)
	}
	lexp := &loggingExporter{SpanExporter: exp, logger: logger, endpoint: u.Redacted()}
	// troupe's name and version, under what the operator set in
	// OTEL_SERVICE_NAME and OTEL_RESOURCE_ATTRIBUTES (the environment
	// detector, merged last, wins).
	res, err := resource.Merge(resource.Default(), resource.NewSchemaless(
		attribute.String("service.name", "troupe"),
		attribute.String("service.version", opts.ServiceVersion),
	))
	if err == nil {
		var env *resource.Resource
		if env, err = resource.New(context.Background(), resource.WithFromEnv()); err == nil {
			res, err = resource.Merge(res, env)
		}
	}
	if err != nil {
		_ = exp.Shutdown(context.Background())
		return nil, fmt.Errorf("tracing: the resource: %w", err)
	}
	tp := sdktrace.NewTracerProvider(
		sdktrace.WithBatcher(lexp),
		sdktrace.WithResource(res),
	)
	logger.Info("tracing: sending spans over OTLP/HTTP", "endpoint", u.Redacted(), "from", from)
	return &Tracer{provider: tp, tracer: tp.Tracer(InstrumentationName), exporter: lexp}, nil
}

// propagator reads and writes a span context and baggage in W3C format,
// the format SEP-414 puts in _meta.
func propagator() propagation.TextMapPropagator {
	return propagation.NewCompositeTextMapPropagator(propagation.TraceContext{}, propagation.Baggage{})
}

// StartCall starts the span of a tools/call, "tools/call <tool>". Its
// parent is the client's span when the call's _meta carries one
// (traceparent, tracestate, baggage: SEP-414); a missing or malformed
// traceparent starts a new trace, never an error. The span carries the
// correlation id, the tool and the session, never the arguments. The
// returned context holds the span (and the client's baggage): the tool's
// own spans and the downstream request's _meta hang from it. The caller
// ends the span.
func (t *Tracer) StartCall(ctx context.Context, meta json.RawMessage, tool, correlationID, session string) (context.Context, trace.Span) {
	if t == nil {
		return ctx, trace.SpanFromContext(context.Background())
	}
	opts := []trace.SpanStartOption{
		trace.WithSpanKind(trace.SpanKindServer),
		trace.WithAttributes(
			MethodNameKey.String("tools/call"),
			ToolNameKey.String(tool),
			CorrelationIDKey.String(correlationID),
			SessionIDKey.String(session),
		),
	}
	remote := false
	if carrier := metaCarrier(meta); carrier != nil {
		// Extract into a fresh context, to tell the client's span from
		// one ctx may already hold.
		got := propagator().Extract(context.Background(), carrier)
		if sc := trace.SpanContextFromContext(got); sc.IsValid() {
			ctx, remote = trace.ContextWithRemoteSpanContext(ctx, sc), true
		}
		if b := baggage.FromContext(got); b.Len() > 0 {
			ctx = baggage.ContextWithBaggage(ctx, b)
		}
	}
	if !remote {
		opts = append(opts, trace.WithNewRoot())
	}
	return t.tracer.Start(ctx, "tools/call "+spanNameTool(tool), opts...)
}

// StartSpan starts a span named name, a child of ctx's span (a root when
// ctx has none), that began at start (the zero time: now). It serves the
// spans whose start is known only after the fact: the approval wait, a
// request other than a call (named after its method). The caller ends it,
// with span.End(trace.WithTimestamp(...)) if it ended earlier.
func (t *Tracer) StartSpan(ctx context.Context, name string, start time.Time, attrs ...attribute.KeyValue) trace.Span {
	if t == nil {
		return trace.SpanFromContext(context.Background())
	}
	opts := make([]trace.SpanStartOption, 0, 2)
	if !start.IsZero() {
		opts = append(opts, trace.WithTimestamp(start))
	}
	if len(attrs) > 0 {
		opts = append(opts, trace.WithAttributes(attrs...))
	}
	_, span := t.tracer.Start(ctx, name, opts...)
	return span
}

// Shutdown ends tracing: it sends the spans still batched and stops the
// exporter, within ctx. troupe calls it on exit, after its last call, so
// the trace of a short session reaches the collector. It reports spans
// that could not be sent.
func (t *Tracer) Shutdown(ctx context.Context) error {
	if t == nil {
		return nil
	}
	failed := t.exporter.failures.Load()
	err := t.provider.Shutdown(ctx)
	if n := t.exporter.failures.Load() - failed; n > 0 && err == nil {
		err = fmt.Errorf("tracing: %d batch(es) of spans not sent to %s", n, t.exporter.endpoint)
	}
	return err
}

// InjectMeta writes ctx's span context (traceparent, tracestate) and
// baggage into meta, a downstream request's _meta, so the server it goes
// to continues the trace (SEP-414). With no span in ctx (tracing off) it
// writes nothing; a nil meta is left alone.
func InjectMeta(ctx context.Context, meta map[string]any) {
	if meta == nil {
		return
	}
	if !trace.SpanContextFromContext(ctx).IsValid() {
		return
	}
	carrier := propagation.MapCarrier{}
	propagator().Inject(ctx, carrier)
	for k, v := range carrier {
		meta[k] = v
	}
}

// Child starts a span named name below ctx's span, made by that span's
// own provider (no global state), and returns the context holding it. With
// no span in ctx (tracing off) it returns ctx and a no-op span at the cost
// of a context lookup: the tools call it on every run. The caller ends the
// span.
func Child(ctx context.Context, name string, kind trace.SpanKind, attrs ...attribute.KeyValue) (context.Context, trace.Span) {
	parent := trace.SpanFromContext(ctx)
	if !parent.SpanContext().IsValid() {
		return ctx, parent
	}
	return parent.TracerProvider().Tracer(InstrumentationName).Start(ctx, name,
		trace.WithSpanKind(kind), trace.WithAttributes(attrs...))
}

// Fail marks span failed with a fixed description (why, never a message
// that could carry a path or an argument) and the error kind as the
// OpenTelemetry attribute error.type. A nil err leaves span alone.
func Fail(span trace.Span, err error, why, kind string) {
	if err == nil || !span.IsRecording() {
		return
	}
	span.SetStatus(codes.Error, why)
	if kind != "" {
		span.SetAttributes(errorTypeKey.String(kind))
	}
}

// errorTypeKey is OpenTelemetry's error.type: the class of an error.
const errorTypeKey = semconv.ErrorTypeKey

// metaCarrier reads the SEP-414 members of a request's _meta; nil when
// meta is not an object or has none of them. Members must be spelled
// exactly and be strings; others are ignored.
func metaCarrier(meta json.RawMessage) propagation.MapCarrier {
	if len(meta) == 0 {
		return nil
	}
	var members map[string]json.RawMessage
	if err := json.Unmarshal(meta, &members); err != nil {
		return nil
	}
	var carrier propagation.MapCarrier
	for _, key := range [...]string{metaTraceparent, metaTracestate, metaBaggage} {
		raw, ok := members[key]
		if !ok {
			continue
		}
		var s string
		if json.Unmarshal(raw, &s) != nil {
			continue
		}
		if carrier == nil {
			carrier = propagation.MapCarrier{}
		}
		carrier[key] = s
	}
	return carrier
}

// spanNameTool bounds a client-chosen tool name for a span's name.
func spanNameTool(tool string) string {
	if len(tool) <= maxSpanNameTool {
		return tool
	}
	cut := maxSpanNameTool
	for cut > 0 && tool[cut]&0xC0 == 0x80 { // not inside a UTF-8 sequence
		cut--
	}
	return tool[:cut] + "…"
}

// loggingExporter logs when its exporter stops sending, instead of
// leaving each failed batch to OpenTelemetry's global error handler, and
// counts the failed batches for Shutdown. A collector that is down fails
// every batch, every few seconds: that is one warning with the reason when
// sending starts failing, and one line when it works again, not a line a
// batch.
type loggingExporter struct {
	sdktrace.SpanExporter
	logger   *slog.Logger
	endpoint string
	failures atomic.Int64
	// failing is true from a failed batch to the next one sent.
	failing atomic.Bool
	// lost counts the spans of the batches failed since failing began.
	lost atomic.Int64
}

// ExportSpans sends spans; a failure is counted, logged when it is the
// first since sending worked, and not returned (the batch processor would
// hand it to the global handler).
func (e *loggingExporter) ExportSpans(ctx context.Context, spans []sdktrace.ReadOnlySpan) error {
	if err := e.SpanExporter.ExportSpans(ctx, spans); err != nil {
		e.failures.Add(1)
		e.lost.Add(int64(len(spans)))
		if !e.failing.Swap(true) {
			e.logger.Warn("tracing: spans not sent to the collector; this is logged once until sending works again",
				"endpoint", e.endpoint, "spans", len(spans), "err", err, "hint", exportHint(err))
		}
		return nil
	}
	if e.failing.Swap(false) {
		e.logger.Info("tracing: the collector takes spans again", "endpoint", e.endpoint, "spans_lost", e.lost.Swap(0))
	}
	return nil
}

// exportHint says what to check for a failed export.
func exportHint(err error) string {
	msg := err.Error()
	switch {
	case strings.Contains(msg, "404"):
		return "the collector has no traces receiver at this URL: OTLP/HTTP takes traces at /v1/traces"
	case strings.Contains(msg, "401") || strings.Contains(msg, "403"):
		return "the collector refused the credentials: set them in OTEL_EXPORTER_OTLP_HEADERS (e.g. authorization=Bearer …)"
	default:
		return "check that a collector listens at this URL (OTLP/HTTP, usually port 4318)"
	}
}
