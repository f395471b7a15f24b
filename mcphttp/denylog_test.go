package mcphttp

import (
	"bytes"
	"log/slog"
	"strconv"
	"strings"
	"sync"
	"testing"
)

// lockedBuffer is a log sink several handler goroutines may write to.
type lockedBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuffer) lines(substr string) []string {
	l.mu.Lock()
	defer l.mu.Unlock()
	var out []string
	for _, line := range strings.Split(l.b.String(), "\n") {
		if strings.Contains(line, substr) {
			out = append(out, line)
		}
	}
	return out
}

// TestRefusedRequestsLoggedAtInfo checks that requests refused by the
// security checks (token, Origin, Host) are logged at info — not only at
// debug — with the status, the reason and the client's address, once per
// burst, and never with the token the client sent.
func TestRefusedRequestsLoggedAtInfo(t *testing.T) {
	const secret = "wrong-secret-value-42"
	cases := []struct {
		name    string
		opts    Options
		headers []string
		status  int
		reason  string
	}{
		{"bad token", Options{BearerToken: "right-token"}, []string{"Authorization", "Bearer " + secret}, 401, "invalid bearer token"},
		{"no token", Options{BearerToken: "right-token"}, []string{"Authorization", ""}, 401, "authentication required"},
		{"origin", Options{}, []string{"Origin", "https://evil.example"}, 403, "https://evil.example"},
		{"host", Options{CheckHost: true}, []string{"Host", "rebind.example:80"}, 403, "DNS rebinding"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			var sink lockedBuffer
			tc.opts.Logger = slog.New(slog.NewTextHandler(&sink, &slog.HandlerOptions{Level: slog.LevelInfo}))
			r := newRig(t, rigConfig{opts: tc.opts})
			for range 20 {
				resp, _ := r.post("", initBody("2025-06-18"), tc.headers...)
				if resp.StatusCode != tc.status {
					t.Fatalf("status %d, want %d", resp.StatusCode, tc.status)
				}
			}
			got := sink.lines("http request refused")
			if len(got) != 1 {
				t.Fatalf("want one info line for a burst of 20 refusals, got %d:\n%s", len(got), strings.Join(got, "\n"))
			}
			line := got[0]
			for _, want := range []string{"level=INFO", "status=" + strconv.Itoa(tc.status), tc.reason, "remote=127.0.0.1:", "method=POST"} {
				if !strings.Contains(line, want) {
					t.Errorf("log line lacks %q: %s", want, line)
				}
			}
			if strings.Contains(line, secret) {
				t.Errorf("log line carries the token the client sent: %s", line)
			}
		})
	}
}
