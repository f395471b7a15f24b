package audit_test

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"

	"troupe/audit"
)

func Example() {
	dir, _ := os.MkdirTemp("", "audit-example")
	defer os.RemoveAll(dir)
	path := filepath.Join(dir, "troupe", "audit.jsonl") // in troupe: audit.DefaultPath()

	l, err := audit.Open(path, audit.Options{})
	if err != nil {
		fmt.Println(err)
		return
	}
	start, last := time.Now(), ""
	for _, tool := range []string{"repo.readFile", "make.test"} {
		rec, err := l.Append(audit.Record{
			Event: audit.EventCall, Session: "s-1", Tool: tool, Approval: "not_required",
			Started: start, Stopped: time.Now(), Outcome: "ok", CorrelationID: "c-" + tool,
		})
		if err != nil {
			fmt.Println(err)
			return
		}
		fmt.Printf("%s: chained %v, hash of %d hex digits\n", rec.Tool, rec.Prev == last, len(rec.Hash))
		last = rec.Hash
	}
	l.Close()

	f, _ := os.Open(path)
	n, err := audit.Verify(f)
	f.Close()
	fmt.Println(n, "records, error:", err)

	// Someone edits the first record: its hash no longer matches.
	data, _ := os.ReadFile(path)
	edited := strings.Replace(string(data), `"outcome":"ok"`, `"outcome":"cancelled"`, 1)
	n, err = audit.Verify(strings.NewReader(edited))
	var ve *audit.VerifyError
	if errors.As(err, &ve) {
		fmt.Printf("%d records, then line %d: %s\n", n, ve.Line, ve.Reason)
	}
	// Output:
	// repo.readFile: chained true, hash of 64 hex digits
	// make.test: chained true, hash of 64 hex digits
	// 2 records, error: <nil>
	// 0 records, then line 1: hash mismatch: the record was changed after it was written
}

// A log rotated by size: each file's first record links to the last
// record of the file before, and VerifyLog checks the chain across them.
func ExampleVerifyLog() {
	dir, _ := os.MkdirTemp("", "audit-example")
	defer os.RemoveAll(dir)
	path := filepath.Join(dir, "audit.jsonl")

	// Tiny files for the example: a record is about 400 bytes, so each
	// file holds two. troupe's default is 64 MiB and 10 rotated files.
	l, err := audit.Open(path, audit.Options{MaxBytes: 1000, MaxFiles: 10})
	if err != nil {
		fmt.Println(err)
		return
	}
	for i := range 5 {
		if _, err := l.Append(audit.Record{Event: audit.EventCall, Tool: fmt.Sprint("tool", i), Outcome: "ok"}); err != nil {
			fmt.Println(err)
			return
		}
	}
	l.Close()

	rep, err := audit.VerifyLog(path)
	for _, f := range rep.Files {
		fmt.Println(filepath.Base(f))
	}
	fmt.Println(rep.Records, "records, error:", err)
	// Output:
	// audit.jsonl.2
	// audit.jsonl.1
	// audit.jsonl
	// 5 records, error: <nil>
}
