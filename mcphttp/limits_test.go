package mcphttp

import (
	"encoding/json"
	"net/http"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"troupe/actors"
	"troupe/limits"
	"troupe/protocol"
)

// checkRateLimited checks an answer refused by an identity's limit: the
// -31429 error with its data, and for want 429 the Retry-After header
// that agrees with it.
func checkRateLimited(t *testing.T, resp *http.Response, body []byte, status int, id string) protocol.RateLimited {
	t.Helper()
	m := decode(t, body)
	if resp.StatusCode != status || m.Error == nil || m.Error.Code != protocol.CodeRateLimited || string(m.ID) != id {
		t.Fatalf("want %d with a -31429 error for id %s, got %d %s", status, id, resp.StatusCode, body)
	}
	var d protocol.RateLimited
	if err := json.Unmarshal(m.Error.Data, &d); err != nil || d.Kind != "rate_limited" || d.RetryAfterSeconds < 1 || d.CorrelationID == "" {
		t.Fatalf("error data: %s", body)
	}
	if status == http.StatusTooManyRequests && resp.Header.Get("Retry-After") != strconv.Itoa(d.RetryAfterSeconds) {
		t.Fatalf("Retry-After %q, data says %d", resp.Header.Get("Retry-After"), d.RetryAfterSeconds)
	}
	return d
}

// Limits key on the identity behind the token: max_sessions per identity
// refuses a second initialize with 429 (and frees the slot when the
// session ends), calls per minute survive a new session, a 2026-07-28
// request over the limit is 429, and another identity is unaffected.
func TestIdentityLimitsOverHTTP(t *testing.T) {
	lim := limits.NewLimiter(limits.NewLocal(), limits.Rules{Default: limits.Limits{CallsPerMinute: 2, MaxSessions: 1}})
	var tooMany atomic.Int64 // the 429s the metrics hear of
	onRefused := func(status int) {
		if status == http.StatusTooManyRequests {
			tooMany.Add(1)
		}
	}
	r := newRig(t, rigConfig{opts: Options{Auth: namedTokens("alice", "ta", "bob", "tb"), Limits: lim, OnRefused: onRefused},
		session: actors.SessionOptions{Limits: lim}})

	r.token = "ta"
	first := r.initialize("2025-06-18")
	resp, body := r.post("", initBody("2025-06-18"))
	checkRateLimited(t, resp, body, http.StatusTooManyRequests, "0")
	if m := decode(t, body); !strings.Contains(m.Error.Message, "token:alice") || !strings.Contains(m.Error.Message, "limits.identity.max_sessions") {
		t.Fatalf("message does not name the identity and the setting: %s", body)
	}

	r.token = "tb"
	bobs := r.initialize("2025-06-18")

	r.token = "ta"
	for i := range 2 {
		resp, body := r.post(first, callBody(i+1, "echo", `{}`, nil))
		if m := decode(t, body); resp.StatusCode != 200 || m.Error != nil {
			t.Fatalf("call %d: %d %s", i+1, resp.StatusCode, body)
		}
	}
	resp, body = r.post(first, callBody(3, "echo", `{}`, nil))
	checkRateLimited(t, resp, body, http.StatusOK, "3") // a session's answer: the error, on the session's stream

	// A new session of the same identity, once the first has ended: its
	// calls are still counted.
	r.deleteSession(first)
	waitFor(t, 5*time.Second, "the ended session's slot", func() bool {
		resp, body := r.post("", initBody("2025-06-18"))
		if resp.StatusCode == http.StatusTooManyRequests {
			return false
		}
		if resp.StatusCode != 200 {
			t.Fatalf("initialize after the session ended: %d %s", resp.StatusCode, body)
		}
		second := resp.Header.Get("Mcp-Session-Id")
		r.post(second, `{"jsonrpc":"2.0","method":"notifications/initialized"}`)
		resp, body = r.post(second, callBody(4, "echo", `{}`, nil))
		checkRateLimited(t, resp, body, http.StatusOK, "4")
		return true
	})

	// 2026-07-28: refused with 429 and Retry-After.
	resp, body = r.post("", modernBody(5, "tools/call", modernMeta("2026-07-28", "")+`,"name":"echo","arguments":{}`),
		modernHeaders("tools/call", "echo")...)
	checkRateLimited(t, resp, body, http.StatusTooManyRequests, "5")
	if n := tooMany.Load(); n < 2 {
		t.Fatalf("OnRefused heard of %d 429s, want the initialize's and the 2026-07-28 call's", n)
	}

	// Bob is unaffected.
	r.token = "tb"
	for i := range 2 {
		resp, body := r.post(bobs, callBody(10+i, "echo", `{}`, nil))
		if m := decode(t, body); resp.StatusCode != 200 || m.Error != nil {
			t.Fatalf("bob's call %d: %d %s", i+1, resp.StatusCode, body)
		}
	}
}
