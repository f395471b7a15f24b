package main

import (
	"encoding/json"
	"fmt"
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

// TestAuditVerifyRotated: "troupe audit verify" checks a rotated log as one
// chain across its files, oldest first; after max_files deleted the oldest
// it checks from the oldest kept file's link and says so; a deleted middle
// file breaks the chain where the next file starts.
func TestAuditVerifyRotated(t *testing.T) {
	dir := t.TempDir()
	write := func(name string, maxFiles int) string {
		path := filepath.Join(dir, name, "audit.jsonl")
		// Records of about 420 bytes: three to a file.
		l, err := audit.Open(path, audit.Options{NoSync: true, MaxBytes: 1400, MaxFiles: maxFiles})
		if err != nil {
			t.Fatal(err)
		}
		defer l.Close()
		for i := range 9 {
			if _, err := l.Append(audit.Record{Event: audit.EventCall, Tool: fmt.Sprintf("tool%d", i), Outcome: "ok"}); err != nil {
				t.Fatal(err)
			}
		}
		return path
	}
	whole := write("whole", 10)
	pruned := write("pruned", 1)
	broken := write("broken", 10)
	if err := os.Remove(broken + ".1"); err != nil {
		t.Fatal(err)
	}
	var prunedStart string
	if data, err := os.ReadFile(pruned + ".1"); err == nil {
		var first audit.Record
		json.Unmarshal([]byte(strings.SplitN(string(data), "\n", 2)[0]), &first)
		prunedStart = first.Prev
	}
	if prunedStart == "" {
		t.Fatalf("%s.1 does not start with a link to a deleted file", pruned)
	}

	for _, c := range []struct {
		args         []string
		code         int
		stdout, errs string
	}{
		{[]string{"audit", "verify", whole}, 0,
			whole + ": 9 records in 3 files (oldest first: audit.jsonl.2, audit.jsonl.1, audit.jsonl), chain intact\n", ""},
		{[]string{"audit", "verify", "-c", "audit.path=" + whole}, 0, whole + ": 9 records in 3 files", ""},
		{[]string{"audit", "verify", pruned}, 0,
			pruned + ": 6 records in 2 files (oldest first: audit.jsonl.1, audit.jsonl), chain intact\n",
			"troupe: note: " + pruned + ".1 begins with a record that links to " + prunedStart + ", which is in none of the files checked"},
		{[]string{"audit", "verify", broken}, 1, "",
			broken + ": line 1: prev mismatch: the first record does not follow the last record of " + broken + ".2"},
		// One rotated file alone is a log of its own.
		{[]string{"audit", "verify", whole + ".1"}, 0, whole + ".1: 3 records, chain intact\n", "troupe: note: " + whole + ".1 begins with"},
	} {
		t.Run(strings.Join(c.args, " "), func(t *testing.T) {
			stdout, stderr := tempFile(t, dir, "out"), tempFile(t, dir, "err")
			if got := run(c.args, strings.NewReader(""), stdout, stderr); got != c.code {
				errText, _ := os.ReadFile(stderr.Name())
				t.Fatalf("exit %d, want %d; stderr %s", got, c.code, errText)
			}
			out, _ := os.ReadFile(stdout.Name())
			errText, _ := os.ReadFile(stderr.Name())
			if !strings.HasPrefix(string(out), c.stdout) || (c.stdout == "" && len(out) > 0) || !strings.Contains(string(errText), c.errs) ||
				(c.errs == "" && len(errText) > 0) {
				t.Fatalf("stdout %q, stderr %q; want stdout %q and stderr mentioning %q", out, errText, c.stdout, c.errs)
			}
		})
	}
}
