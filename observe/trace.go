package observe

import (
	"context"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/trace"

	"troupe/actors"
	"troupe/observe/tracing"
)

// The attributes the Hub adds to the tracer's spans.
const (
	// outcomeKey is a call's outcome ("ok" or the error kind) or an
	// approval's decision.
	outcomeKey = attribute.Key("troupe.outcome")
	// identityKey names who called (identity.Identity.String), never a
	// credential.
	identityKey = attribute.Key("troupe.identity")
	// errorTypeKey is OpenTelemetry's error.type, the class of a failure.
	errorTypeKey = attribute.Key("error.type")
)

// traceRequest records a request's span after the fact, from began to
// now, named after its method; nothing when tracing is off.
func (h *Hub) traceRequest(session, method string, began time.Time) {
	if h.tracer == nil {
		return
	}
	h.tracer.StartSpan(context.Background(), method, began,
		tracing.MethodNameKey.String(method), tracing.SessionIDKey.String(session)).End()
}

// traceCall starts a call's span (its parent the client's, from _meta)
// and returns the span's context and the span; ctx and nil when tracing is
// off.
func (h *Hub) traceCall(ctx context.Context, c *actors.CallView) (context.Context, trace.Span) {
	if h.tracer == nil {
		return ctx, nil
	}
	ctx, span := h.tracer.StartCall(ctx, c.Meta, c.Tool, c.ID, c.Session)
	span.SetAttributes(identityKey.String(c.Identity))
	return ctx, span
}

// traceApproval records the approval wait, which ended now, as a child
// span "approval" of the call's.
func (h *Hub) traceApproval(v *callView, outcome string, waited time.Duration) {
	if h.tracer == nil || v.span == nil {
		return
	}
	h.tracer.StartSpan(v.ctx, "approval", time.Now().Add(-waited), outcomeKey.String(outcome)).End()
}

// endCall ends the call's span with its outcome; a call that did not end
// "ok" marks the span failed, with the outcome (an error kind, never a
// message) as description and error.type.
func (h *Hub) endCall(v *callView, outcome string) {
	v.span.SetAttributes(outcomeKey.String(outcome))
	if outcome != "ok" {
		v.span.SetStatus(codes.Error, outcome)
		v.span.SetAttributes(errorTypeKey.String(outcome))
	}
	v.span.End()
}
