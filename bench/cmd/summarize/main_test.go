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

// TestClusterTables: with -peers "" (bench/run's ONLY=cluster) only
// troupe's cluster tables are printed: the hop per round with its median
// and forwarded − local, and the idle sessions one and three nodes held,
// whose refused surplus (the cap) is not a problem; a hop run with failed
// calls is.
func TestClusterTables(t *testing.T) {
	dir := t.TempDir()
	write := func(sub, file, body string) {
		t.Helper()
		d := filepath.Join(dir, sub)
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(d, file+".json"), []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	write("r1/cluster", "hop_local", `{"calls":100,"ok":100,"errors":{},"calls_per_sec":2000,"latency":{"p50_us":400,"p99_us":900}}`)
	write("r1/cluster", "hop_forwarded", `{"calls":100,"ok":100,"errors":{},"calls_per_sec":1000,"latency":{"p50_us":900,"p99_us":2100}}`)
	write("r2/cluster", "hop_local", `{"calls":100,"ok":100,"errors":{},"calls_per_sec":2000,"latency":{"p50_us":500,"p99_us":1000}}`)
	write("r2/cluster", "hop_forwarded", `{"calls":100,"ok":98,"errors":{"transport":2},"calls_per_sec":1000,"latency":{"p50_us":1100,"p99_us":2400}}`)
	write("cluster", "cap_1node", `{"sessions_opened":200,"errors":{"transport":1},"aborted":"session 201: HTTP 503"}`)
	write("cluster", "cap_3nodes", `{"sessions_opened":600,"errors":{"transport":1},"aborted":"session 601: HTTP 503",
		"per_url":[{"url":"a","sessions":200},{"url":"b","sessions":200},{"url":"c","sessions":200}]}`)
	var out, errOut bytes.Buffer
	if code := run([]string{"-peers", "", dir}, &out, &errOut); code != 0 {
		t.Fatalf("exit %d: %s", code, errOut.String())
	}
	for _, want := range []string{
		`sent to the owner, p50 µs\s+400\s+500\s+450\s`,
		`added by the hop, p50 µs\s+500\s+600\s+550\s`,
		`added by the hop, p99 µs\s+1,200\s+1,400\s+1,300\s`,
		`one node\s+200\s`,
		`three nodes\s+600 \(200 \+ 200 \+ 200\)\s`,
		`three nodes ÷ one node\s+3\.00`,
		`cluster r2/cluster/hop_forwarded.json: 2 failed calls`,
	} {
		if !regexp.MustCompile(want).MatchString(out.String()) {
			t.Errorf("no line matching %q in:\n%s", want, out.String())
		}
	}
	if strings.Contains(out.String(), "Medians of") || strings.Contains(out.String(), "cap_") {
		t.Errorf("peer tables, or the cap's refusals named as a problem:\n%s", out.String())
	}
}
