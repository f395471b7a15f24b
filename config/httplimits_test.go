package config

import (
	"strings"
	"testing"
)

// The bounds of 2026-07-28 HTTP requests have defaults, take overrides,
// and refuse anything but a positive integer with the key named.
func TestStatelessHTTPLimits(t *testing.T) {
	c, err := load(t, "", nil)
	if err != nil {
		t.Fatal(err)
	}
	if c.HTTP.MaxStatelessRequests != 1024 || c.HTTP.MaxSubscriptions != 256 {
		t.Fatalf("defaults: max_stateless_requests %d, max_subscriptions %d", c.HTTP.MaxStatelessRequests, c.HTTP.MaxSubscriptions)
	}
	c, err = load(t, "", nil, "http.max_stateless_requests=3", "http.max_subscriptions=2")
	if err != nil || c.HTTP.MaxStatelessRequests != 3 || c.HTTP.MaxSubscriptions != 2 {
		t.Fatalf("overrides: %v %+v", err, c)
	}
	for _, bad := range []string{"http.max_stateless_requests=0", "http.max_stateless_requests=-1",
		"http.max_subscriptions=0", "http.max_subscriptions=-5", "http.max_subscriptions=1.5", `http.max_stateless_requests="many"`} {
		key, _, _ := strings.Cut(bad, "=")
		if _, err := load(t, "", nil, bad); err == nil || !strings.Contains(err.Error(), key) {
			t.Errorf("%s: %v, want an error naming %s", bad, err, key)
		}
	}
}
