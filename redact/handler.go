package redact

import (
	"context"
	"encoding"
	"encoding/json"
	"fmt"
	"log/slog"
	"sync/atomic"
)

// Handler returns a slog.Handler that masks each record with live's current
// Redactor before passing it to h: the message, attribute keys, string
// values (in groups too, at any depth), LogValuers once resolved, and
// values of other kinds that render as text (errors, fmt.Stringers,
// []byte, encoding.TextMarshalers, json.Marshalers, structs and maps
// through their "%+v" form). Such a value is replaced by its masked text
// only when that text contains a secret, so values without one keep their
// type (and their rendering by h). Numbers, booleans, times and durations
// pass untouched.
//
// Attributes given to WithAttrs are kept unmasked and masked with the
// Redactor current at each record, so a secret added by a config reload is
// masked in loggers derived before it; the derived handler of h is rebuilt
// once per Redactor, not per record.
func Handler(h slog.Handler, live *Live) slog.Handler {
	return &handler{base: h, live: live}
}

// handler is Handler's slog.Handler. Its fields are fixed at creation, but
// for the cache.
type handler struct {
	base slog.Handler // the wrapped handler, none of ops applied
	live *Live
	ops  []op // WithAttrs and WithGroup calls, oldest first

	// cache is base with ops applied, attributes masked with cache.r.
	cache atomic.Pointer[derived]
}

// op is one WithAttrs (attrs) or WithGroup (group) call.
type op struct {
	group string
	attrs []slog.Attr
}

// derived is the wrapped handler for one Redactor.
type derived struct {
	r *Redactor
	h slog.Handler
}

func (x *handler) Enabled(ctx context.Context, level slog.Level) bool {
	return x.base.Enabled(ctx, level)
}

func (x *handler) Handle(ctx context.Context, rec slog.Record) error {
	r := x.live.Load()
	d := x.cache.Load()
	if d == nil || d.r != r {
		h := x.base
		for _, o := range x.ops {
			if o.attrs == nil {
				h = h.WithGroup(o.group)
			} else {
				h = h.WithAttrs(maskAttrs(r, o.attrs))
			}
		}
		d = &derived{r: r, h: h}
		x.cache.Store(d)
	}
	if r.Len() == 0 {
		return d.h.Handle(ctx, rec)
	}
	masked := slog.NewRecord(rec.Time, rec.Level, r.Replace(rec.Message), rec.PC)
	rec.Attrs(func(a slog.Attr) bool {
		masked.AddAttrs(maskAttr(r, a))
		return true
	})
	return d.h.Handle(ctx, masked)
}

func (x *handler) WithAttrs(attrs []slog.Attr) slog.Handler {
	if len(attrs) == 0 {
		return x
	}
	return x.with(op{attrs: attrs})
}

func (x *handler) WithGroup(name string) slog.Handler {
	if name == "" {
		return x
	}
	return x.with(op{group: name})
}

func (x *handler) with(o op) *handler {
	ops := append(x.ops[:len(x.ops):len(x.ops)], o)
	return &handler{base: x.base, live: x.live, ops: ops}
}

func maskAttrs(r *Redactor, attrs []slog.Attr) []slog.Attr {
	out := make([]slog.Attr, len(attrs))
	for i, a := range attrs {
		out[i] = maskAttr(r, a)
	}
	return out
}

func maskAttr(r *Redactor, a slog.Attr) slog.Attr {
	if r.Len() == 0 {
		return a
	}
	a.Key = r.Replace(a.Key)
	v := a.Value.Resolve()
	switch v.Kind() {
	case slog.KindString:
		a.Value = slog.StringValue(r.Replace(v.String()))
	case slog.KindGroup:
		a.Value = slog.GroupValue(maskAttrs(r, v.Group())...)
	case slog.KindAny:
		a.Value = maskAny(r, v)
	default:
		a.Value = v
	}
	return a
}

// maskAny checks the texts a handler could render v as, and returns the
// first that holds a secret, masked; v itself when none does.
func maskAny(r *Redactor, v slog.Value) slog.Value {
	x := v.Any()
	if x == nil {
		return v
	}
	if b, ok := x.([]byte); ok { // slog's text handler prints []byte as a string
		if s := string(b); r.index(s) >= 0 {
			return slog.StringValue(r.Replace(s))
		}
		return v
	}
	for _, s := range renderings(x) {
		if r.index(s) < 0 {
			continue
		}
		if _, isErr := x.(error); isErr {
			// Still an error, so handlers that treat errors specially
			// (tint colours them) keep doing so.
			return slog.AnyValue(maskedError(r.Replace(s)))
		}
		return slog.StringValue(r.Replace(s))
	}
	return v
}

// renderings are the texts slog handlers may print x as: fmt's "%+v"
// (errors and Stringers included), MarshalText and MarshalJSON. A method
// that panics contributes nothing rather than crash the logger.
func renderings(x any) []string {
	out := []string{fmt.Sprintf("%+v", x)} // fmt recovers panics itself
	try := func(f func() ([]byte, error)) {
		defer func() { _ = recover() }()
		if b, err := f(); err == nil {
			out = append(out, string(b))
		}
	}
	if m, ok := x.(encoding.TextMarshaler); ok {
		try(m.MarshalText)
	}
	if m, ok := x.(json.Marshaler); ok {
		try(m.MarshalJSON)
	}
	return out
}

// maskedError stands for an error whose text held a secret.
type maskedError string

func (e maskedError) Error() string { return string(e) }
