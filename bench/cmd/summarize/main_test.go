package main

import (
	"bytes"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// TestStatelessRows: the reports of `troupe bench --stateless` become the
// table's stateless rows and ratios, and a peer whose calls fell back to a
// 2025 revision is named under Problems.
func TestStatelessRows(t *testing.T) {
	dir := t.TempDir()
	write := func(peer, file, body string) {
		t.Helper()
		d := filepath.Join(dir, "r1", peer)
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(d, file+".json"), []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	write("troupe", "http_stateless", `{"calls":100,"ok":100,"errors":{},"calls_per_sec":1000,"latency":{"p99_us":800},
		"stateless":"2026-07-28","server":{"cpu_us_per_call":50}}`)
	write("mcpgo", "http_stateless", `{"calls":100,"ok":100,"errors":{},"calls_per_sec":500,"latency":{"p99_us":1600},
		"stateless":"2025-06-18","server":{"cpu_us_per_call":100}}`)
	var out, errOut bytes.Buffer
	if code := run([]string{"-peers", "troupe,mcpgo", dir}, &out, &errOut); code != 0 {
		t.Fatalf("exit %d: %s", code, errOut.String())
	}
	for _, want := range []string{
		`HTTP stateless calls/s, 64 callers\s+1,000\s+500\s`,
		`HTTP stateless p99 µs\s+800\s+1,600\s`,
		`HTTP stateless server CPU µs/call\s+50\.0\s+100\s`,
		`HTTP stateless calls/s, 64 callers ↑\s+2\.00\s+2\.00`,
		`HTTP stateless server CPU µs/call ↓\s+0\.50\s+0\.50`,
		`round 1 mcpgo http_stateless: the calls spoke 2025-06-18, not 2026-07-28`,
	} {
		if !regexp.MustCompile(want).MatchString(out.String()) {
			t.Errorf("no line matching %q in:\n%s", want, out.String())
		}
	}
	if strings.Contains(out.String(), "troupe http_stateless: the calls spoke") {
		t.Errorf("troupe's 2026-07-28 calls named as a problem:\n%s", out.String())
	}
}
