package main

import (
	"os"
	"strings"
	"testing"
)

func TestBenchUsageErrors(t *testing.T) {
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"bench"}, "exactly one target"},
		{[]string{"bench", "--http", "http://127.0.0.1:1/mcp", "--stdio", "x"}, "exactly one target"},
		{[]string{"bench", "--stdio", "x", "--", "y"}, "not both"},
		{[]string{"bench", "--http", "127.0.0.1:1"}, "not an http"},
		{[]string{"bench", "fast", "--stdio", "x"}, "unknown mode"},
		{[]string{"bench", "sessions", "--stdio", "x"}, "HTTP target"},
		{[]string{"bench", "soak", "--stdio", "x"}, "rate and a duration"},
		{[]string{"bench", "--stdio", "x", "--calls", "0"}, "must be positive"},
		{[]string{"bench", "--stdio", "x", "--args", "[1]"}, "JSON object"},
		{[]string{"bench", "--stdio", "x", "--bearer-token-env", "TROUPE_BENCH_UNSET_VAR"}, "not set"},
		{[]string{"bench", "--no-such-flag"}, "flag provided but not defined"},
		{[]string{"bench", "--stateless", "--stdio", "x"}, "need an HTTP target"},
		{[]string{"bench", "sessions", "--stateless", "--http", "http://127.0.0.1:1/mcp"}, "cannot be stateless"},
		{[]string{"bench", "--stateless", "--sessions", "4", "--http", "http://127.0.0.1:1/mcp"}, "open no sessions"},
	} {
		dir := t.TempDir()
		stdout, stderr := tempFile(t, dir, "out"), tempFile(t, dir, "err")
		code := run(c.args, strings.NewReader(""), stdout, stderr)
		errText, _ := os.ReadFile(stderr.Name())
		if code != 2 || !strings.Contains(string(errText), c.want) {
			t.Errorf("troupe %v: exit %d, stderr %q; want 2 and %q", c.args, code, errText, c.want)
		}
	}
}

func TestBenchServerThatDoesNotStart(t *testing.T) {
	dir := t.TempDir()
	stdout, stderr := tempFile(t, dir, "out"), tempFile(t, dir, "err")
	if code := run([]string{"bench", "--", "true"}, strings.NewReader(""), stdout, stderr); code != 1 {
		errText, _ := os.ReadFile(stderr.Name())
		t.Fatalf("exit %d: %s", code, errText)
	}
}
