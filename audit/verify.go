package audit

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
)

// VerifyError says where and how an audit log fails verification.
type VerifyError struct {
	// Line is the 1-based number of the first line that fails.
	Line int
	// Reason says what is wrong with it, for people.
	Reason string
}

func (e *VerifyError) Error() string { return fmt.Sprintf("line %d: %s", e.Line, e.Reason) }

// Verify reads an audit log and checks each line in turn: that it is a
// JSON record, that its hash matches its canonical form (see the package
// documentation) and that its prev is the hash of the line before ("" on
// the first). It returns the number of records that passed and, at the
// first line that does not, a *VerifyError naming the line:
//
//   - "hash mismatch": the record was changed after it was written (a value
//     edited, a field added or removed);
//   - "prev mismatch": the record does not follow the one before it (a
//     record before it was deleted or inserted, or records were reordered);
//     on line 1, records were deleted from the start;
//   - "torn line": part of a record, as a crash during a write leaves;
//   - "not JSON", "not an audit record", "no hash": anything else.
//
// Errors reading r are returned as they are. An empty log is valid.
// Verify cannot tell that records were removed from the end, or that the
// whole file was rewritten with a new chain: compare the last hash with an
// anchor kept elsewhere for that.
func Verify(r io.Reader) (int, error) {
	br := bufio.NewReaderSize(r, maxLine+1)
	n, prev := 0, ""
	for lineNo := 1; ; lineNo++ {
		line, err := br.ReadSlice('\n')
		switch {
		case errors.Is(err, bufio.ErrBufferFull):
			return n, &VerifyError{lineNo, fmt.Sprintf("longer than %d bytes: not an audit record", maxLine)}
		case err == io.EOF && len(line) == 0:
			return n, nil
		case err != nil && err != io.EOF:
			return n, err
		}
		last := err == io.EOF // the file ends without a newline after line
		line = bytes.TrimSuffix(line, []byte{'\n'})
		if reason := check(line, last, prev, lineNo); reason != "" {
			return n, &VerifyError{lineNo, reason}
		}
		prev, _, _ = splitHash(line)
		n++
		if last {
			return n, nil
		}
	}
}

// check returns what is wrong with one line, "" when nothing is.
func check(line []byte, last bool, prev string, lineNo int) string {
	if len(line) == 0 {
		return "empty line: not an audit record"
	}
	if !json.Valid(line) {
		switch {
		case isTornRecord(line) && last:
			return "torn line: the file ends inside a record (a write cut short by a crash?)"
		case isTornRecord(line):
			return "torn line: an incomplete record (a write cut short by a crash?); once checked, delete the line: the records after it chain to the one before it"
		}
		return "not JSON"
	}
	var rec Record
	if err := json.Unmarshal(line, &rec); err != nil {
		return "not an audit record: " + err.Error()
	}
	claimed, computed, ok := splitHash(line)
	if !ok {
		return `no hash: the record does not end with its "hash" field`
	}
	if claimed != computed {
		return "hash mismatch: the record was changed after it was written"
	}
	if rec.Prev != prev {
		if lineNo == 1 {
			return "prev mismatch: the first record does not start a chain (records deleted from the start?)"
		}
		return fmt.Sprintf("prev mismatch: the record does not follow line %d (a record deleted, inserted or moved?)", lineNo-1)
	}
	return ""
}
