package audit

import (
	"bytes"
	"os"
	"path/filepath"
	"testing"
	"time"
)

// goldenRecords are the records of testdata/golden.jsonl, which the
// first writer (encoding/json) wrote. The file pins the log's format: a
// log written before must verify, and the same records must still be
// written byte for byte the same.
func goldenRecords() []Record {
	zero, one, minus := 0, 1, -1
	at := func(sec, nsec int, zone *time.Location) time.Time {
		return time.Date(2026, 3, 4, 5, 6, sec, nsec, zone)
	}
	east, west := time.FixedZone("E", 5*3600+30*60), time.FixedZone("W", -7*3600)
	return []Record{
		{Time: at(1, 0, time.UTC), Event: EventCall, Session: "s1", Tool: "echo", ArgsHash: "fc6fcfb4e05ba73fcf9a2f9c8d13b4dff0125efabea6d1226b799db43643d567",
			Approval: "not_required", Started: at(0, 999_999_999, time.UTC), Stopped: at(1, 100, east), Outcome: "ok", CorrelationID: "c1"},
		{Time: at(2, 120_000_000, west), Event: EventCall, Session: "s<&>\u2028\u2029", Tool: "shell.exec", ArgsHash: "x",
			Cwd: "sub/dir \"q\" \\ é 中 😀", SessionCwd: "w", SessionEnv: []string{"A", "TOKEN"}, Sandbox: "default",
			TimeoutMs: 30_000, Approval: "approved", Started: at(1, 1, west), Stopped: at(2, 10, east), Outcome: "deadline_exceeded",
			ExitStatus: &minus, StdoutBytes: 1 << 40, StderrBytes: -5, CorrelationID: "\x00\x01\b\f\n\r\t\x1f\x7f"},
		{Time: at(3, 0, time.UTC), Event: "other", Tool: "bad \xff\xfe utf-8 \xe2\x82", ExitStatus: &zero, SessionEnv: []string{}},
		{Time: at(4, 5, east), Event: EventCall, ExitStatus: &one, TimeoutMs: -1, Stopped: time.Date(9999, 12, 31, 23, 59, 59, 999_999_999, time.UTC)},
	}
}

const goldenLog = "testdata/golden.jsonl"

// TestGoldenLog checks that a log written before verifies, and that the
// same records are written as they were then.
func TestGoldenLog(t *testing.T) {
	want, err := os.ReadFile(goldenLog)
	if err != nil {
		t.Fatal(err)
	}
	if n, err := Verify(bytes.NewReader(want)); n != 4 || err != nil {
		t.Fatalf("Verify(%s) = %d, %v; want 4 records", goldenLog, n, err)
	}
	path := filepath.Join(t.TempDir(), "a.jsonl")
	l, err := Open(path, Options{NoSync: true})
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	if err := l.AppendAll(goldenRecords()); err != nil {
		t.Fatal(err)
	}
	if got, _ := os.ReadFile(path); !bytes.Equal(got, want) {
		t.Fatalf("the records are written differently now:\n%s\nwas:\n%s", got, want)
	}
}
