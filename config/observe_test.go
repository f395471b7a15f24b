package config

import (
	"strings"
	"testing"
)

// [metrics] and [tracing] are off by default, take an address and a URL,
// and refuse what troupe could not listen on or send to, naming the key
// (credentials in a URL are refused: they belong in the collector's
// network setup, not in a file people paste).
func TestMetricsAndTracingKeys(t *testing.T) {
	c, err := load(t, "", nil)
	if err != nil {
		t.Fatal(err)
	}
	if c.Metrics.Listen != "" || c.Tracing.Endpoint != "" {
		t.Fatalf("defaults: metrics.listen %q, tracing.endpoint %q; want both off", c.Metrics.Listen, c.Tracing.Endpoint)
	}
	c, err = load(t, "", nil, `metrics.listen="127.0.0.1:9464"`, `tracing.endpoint="http://127.0.0.1:4318/v1/traces"`)
	if err != nil || c.Metrics.Listen != "127.0.0.1:9464" || c.Tracing.Endpoint != "http://127.0.0.1:4318/v1/traces" {
		t.Fatalf("overrides: %v %+v %+v", err, c.Metrics, c.Tracing)
	}
	for _, bad := range [][]string{
		{`metrics.listen="9464"`},
		{`metrics.listen="localhost:http"`},
		{`metrics.listen="127.0.0.1:70000"`},
		{`metrics.listen="127.0.0.1:8080"`, `http.listen="127.0.0.1:8080"`},
		{`http.path="/metrics"`},
		{`http.path="/status"`},
		{`http.path="/status/accept"`},
		{`tracing.endpoint="127.0.0.1:4318"`},
		{`tracing.endpoint="grpc://collector:4317"`},
		{`tracing.endpoint="http:///v1/traces"`},
	} {
		key, _, _ := strings.Cut(bad[0], "=")
		if _, err := load(t, "", nil, bad...); err == nil || !strings.Contains(err.Error(), key) {
			t.Errorf("%v: %v, want an error naming %s", bad, err, key)
		}
	}
	_, err = load(t, "", nil, `tracing.endpoint="https://user:hunter2@collector/v1/traces"`)
	if err == nil || !strings.Contains(err.Error(), "must not carry credentials") {
		t.Errorf("credentials in the endpoint: %v, want a refusal", err)
	}
}
