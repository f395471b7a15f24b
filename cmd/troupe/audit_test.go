package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"troupe/audit"
)

func TestAuditVerify(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "audit.jsonl")
	l, err := audit.Open(path, audit.Options{NoSync: true})
	if err != nil {
		t.Fatal(err)
	}
	for _, tool := range []string{"a", "b", "c"} {
		if _, err := l.Append(audit.Record{Event: audit.EventCall, Tool: tool, Outcome: "ok"}); err != nil {
			t.Fatal(err)
		}
	}
	l.Close()
	data, _ := os.ReadFile(path)
	tampered := filepath.Join(dir, "tampered.jsonl")
	os.WriteFile(tampered, []byte(strings.Replace(string(data), `"tool":"b"`, `"tool":"x"`, 1)), 0o600)

	// The default file: $XDG_STATE_HOME/troupe/audit.jsonl.
	state := filepath.Join(dir, "state")
	os.MkdirAll(filepath.Join(state, "troupe"), 0o700)
	os.WriteFile(filepath.Join(state, "troupe", "audit.jsonl"), data, 0o600)
	t.Setenv("XDG_STATE_HOME", state)

	for _, c := range []struct {
		args         []string
		code         int
		stdout, errs string
	}{
		{[]string{"audit", "verify", path}, 0, path + ": 3 records, chain intact\n", ""},
		{[]string{"audit", "verify"}, 0, filepath.Join(state, "troupe", "audit.jsonl") + ": 3 records, chain intact\n", ""},
		{[]string{"audit", "verify", tampered}, 1, "", tampered + ": line 2: hash mismatch"},
		{[]string{"audit", "verify", filepath.Join(dir, "missing")}, 1, "", "no such file"},
		{[]string{"audit"}, 2, "", "usage: troupe audit verify"},
		{[]string{"audit", "check"}, 2, "", "usage: troupe audit verify"},
		{[]string{"audit", "verify", path, "extra"}, 2, "", `unexpected argument "extra"`},
		{[]string{"audit", "verify", "--bogus"}, 2, "", "bogus"},
	} {
		t.Run(strings.Join(c.args, " "), func(t *testing.T) {
			stdout, stderr := tempFile(t, dir, "out"), tempFile(t, dir, "err")
			if got := run(c.args, strings.NewReader(""), stdout, stderr); got != c.code {
				t.Fatalf("exit %d, want %d", got, c.code)
			}
			out, _ := os.ReadFile(stdout.Name())
			errText, _ := os.ReadFile(stderr.Name())
			if string(out) != c.stdout || !strings.Contains(string(errText), c.errs) {
				t.Fatalf("stdout %q, stderr %q; want stdout %q and stderr mentioning %q", out, errText, c.stdout, c.errs)
			}
		})
	}
}
