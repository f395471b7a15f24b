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
