package redact

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"testing"
)

type stringer struct{ s string }

func (s stringer) String() string { return "stringer " + s.s }

type valuer struct{ s string }

func (v valuer) LogValue() slog.Value { return slog.StringValue("valuer " + v.s) }

type textual struct{ s string }

func (t textual) MarshalText() ([]byte, error) { return []byte(strings.ToUpper(t.s)), nil }

func newJSONLogger(live *Live) (*slog.Logger, *bytes.Buffer) {
	var buf bytes.Buffer
	return slog.New(Handler(slog.NewJSONHandler(&buf, nil), live)), &buf
}

func TestHandlerMasksEveryTextualPart(t *testing.T) {
	const secret = "tok-SECRET-1"
	var live Live
	live.Store(New(secret, "TOK-SECRET-2"))
	log, buf := newJSONLogger(&live)
	log.Info("calling with "+secret,
		"plain", "x"+secret+"x",
		"err", fmt.Errorf("auth %s failed", secret),
		"stringer", stringer{secret},
		"struct", struct{ Token string }{secret},
		"map", map[string]string{"h": secret},
		"bytes", []byte(secret),
		"valuer", valuer{secret},
		"text", textual{"tok-secret-2"},
		"count", 42,
		slog.Group("outer", "inner", secret, slog.Group("deeper", "s", secret)),
	)
	out := buf.String()
	if strings.Contains(out, "SECRET") {
		t.Fatalf("a secret reached the log: %s", out)
	}
	var m map[string]any
	if err := json.Unmarshal(buf.Bytes(), &m); err != nil {
		t.Fatal(err)
	}
	for k, want := range map[string]any{
		"msg": "calling with " + Mask, "plain": "x" + Mask + "x", "err": "auth " + Mask + " failed",
		"stringer": "stringer " + Mask, "bytes": Mask, "valuer": "valuer " + Mask, "text": Mask, "count": 42.0,
	} {
		if m[k] != want {
			t.Errorf("%s = %#v, want %#v", k, m[k], want)
		}
	}
	if got := m["outer"].(map[string]any)["deeper"].(map[string]any)["s"]; got != Mask {
		t.Errorf("nested group value %v", got)
	}
}

func TestHandlerKeepsValuesWithoutSecrets(t *testing.T) {
	var live Live
	live.Store(New("tok-SECRET-1"))
	var got slog.Value
	h := Handler(captureHandler{func(r slog.Record) {
		r.Attrs(func(a slog.Attr) bool { got = a.Value; return false })
	}}, &live)
	err := errors.New("harmless")
	slog.New(h).Info("m", "err", err)
	if got.Any() != err {
		t.Fatalf("an error without a secret must be passed as is, got %#v", got.Any())
	}
}

type captureHandler struct{ f func(slog.Record) }

func (captureHandler) Enabled(context.Context, slog.Level) bool { return true }
func (c captureHandler) Handle(_ context.Context, r slog.Record) error {
	c.f(r)
	return nil
}
func (c captureHandler) WithAttrs([]slog.Attr) slog.Handler { return c }
func (c captureHandler) WithGroup(string) slog.Handler      { return c }

// TestHandlerFollowsReload: attributes bound with With before a reload are
// masked with the Redactor of the moment each record is written.
func TestHandlerFollowsReload(t *testing.T) {
	var live Live // zero value: nothing masked
	log, buf := newJSONLogger(&live)
	sub := log.With("token", "new-secret-value").WithGroup("g").With("k", "new-secret-value")
	sub.Info("before")
	if !strings.Contains(buf.String(), "new-secret-value") {
		t.Fatalf("nothing is masked before the first Store: %s", buf.String())
	}
	buf.Reset()
	live.Store(New("new-secret-value"))
	sub.Info("after", "v", "new-secret-value")
	if strings.Contains(buf.String(), "new-secret-value") {
		t.Fatalf("a secret added by reload reached the log: %s", buf.String())
	}
	var m map[string]any
	json.Unmarshal(buf.Bytes(), &m)
	if m["token"] != Mask || m["g"].(map[string]any)["k"] != Mask || m["g"].(map[string]any)["v"] != Mask {
		t.Fatalf("structure or masking lost: %s", buf.String())
	}
}

func TestHandlerConcurrentReload(t *testing.T) {
	var live Live
	log, _ := newJSONLogger(&live)
	log = log.With("a", "secret-0")
	var wg sync.WaitGroup
	for i := range 4 {
		wg.Go(func() {
			for j := range 200 {
				if i == 0 {
					live.Store(New(fmt.Sprintf("secret-%d", j)))
				} else {
					log.Info("m", "v", "secret-1")
				}
			}
		})
	}
	wg.Wait()
}
