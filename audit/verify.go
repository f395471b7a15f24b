package audit

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
)

// VerifyError says where and how an audit log fails verification.
type VerifyError struct {
	// File is the file that holds the line (VerifyLog); "" from Verify.
	File string
	// Line is the 1-based number of the first line that fails.
	Line int
	// Reason says what is wrong with it, for people.
	Reason string
}

func (e *VerifyError) Error() string {
	if e.File != "" {
		return fmt.Sprintf("%s: line %d: %s", e.File, e.Line, e.Reason)
	}
	return fmt.Sprintf("line %d: %s", e.Line, e.Reason)
}

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
// anchor kept elsewhere for that. It checks one file as a whole chain; a
// rotated log is VerifyLog's.
func Verify(r io.Reader) (int, error) {
	n, _, _, err := verify(r, chainStart{})
	return n, err
}

// LogReport is what VerifyLog checked.
type LogReport struct {
	// Files are the files checked, in the chain's order (oldest first).
	Files []string
	// Records counts the records that passed, in all files.
	Records int
	// Start is the hash the oldest file's first record links to: "" when
	// the chain starts there. Otherwise the record it links to is in none
	// of Files: the files before were deleted by rotation (MaxFiles), or
	// by hand, or records were deleted from the oldest file's start; the
	// chain can only be checked from there (compare Start with an anchor
	// kept elsewhere if that matters).
	Start string
}

// VerifyLog checks the log at path across its rotated files (Files): each
// file as Verify does, and each file's first record linking to the last
// record of the file before it. The oldest file's first record may link
// to a record no longer kept (LogReport.Start). At the first line that
// fails it returns what passed so far and a *VerifyError naming the file
// and line; on line 1 of a later file, "prev mismatch" means that file
// does not continue the one before (a file deleted or records removed at
// the seam). A log with no file is an error wrapping fs.ErrNotExist.
func VerifyLog(path string) (LogReport, error) {
	files, err := Files(path)
	if err != nil {
		return LogReport{}, err
	}
	rep := LogReport{Files: files}
	start := chainStart{any: true}
	for _, name := range files {
		n, last, first, err := verifyOne(name, start)
		rep.Records += n
		if start.any {
			rep.Start = first // the chain starts in this file
		}
		if err != nil {
			var ve *VerifyError
			if errors.As(err, &ve) {
				ve.File = name
			}
			return rep, err
		}
		if n > 0 {
			start = chainStart{prev: last, after: name}
		} else if start.any {
			start.after = name
		}
	}
	return rep, nil
}

// verifyOne verifies the file name from start.
func verifyOne(name string, start chainStart) (n int, last, first string, err error) {
	f, err := os.Open(name)
	if err != nil {
		return 0, "", "", err
	}
	defer f.Close()
	return verify(f, start)
}

// chainStart is what the first record of a file must link to.
type chainStart struct {
	prev string // the last hash of the file before, "" when none
	any  bool   // accept what it links to: the oldest file kept
	// after names the file before, for messages; "" when none.
	after string
}

// verify is Verify from start: it also returns the last record's hash
// and what the first record links to.
func verify(r io.Reader, start chainStart) (n int, last, first string, err error) {
	br := bufio.NewReaderSize(r, maxLine+1)
	prev := start.prev
	for lineNo := 1; ; lineNo++ {
		line, err := br.ReadSlice('\n')
		switch {
		case errors.Is(err, bufio.ErrBufferFull):
			return n, prev, first, &VerifyError{Line: lineNo, Reason: fmt.Sprintf("longer than %d bytes: not an audit record", maxLine)}
		case err == io.EOF && len(line) == 0:
			return n, prev, first, nil
		case err != nil && err != io.EOF:
			return n, prev, first, err
		}
		eof := err == io.EOF // the file ends without a newline after line
		line = bytes.TrimSuffix(line, []byte{'\n'})
		rec, reason := check(line, eof)
		if reason == "" && lineNo == 1 {
			first = rec.Prev
			if start.any {
				prev = rec.Prev
			}
		}
		if reason == "" && rec.Prev != prev {
			reason = prevMismatch(lineNo, start)
		}
		if reason != "" {
			return n, prev, first, &VerifyError{Line: lineNo, Reason: reason}
		}
		prev, _, _ = splitHash(line)
		n++
		if eof {
			return n, prev, first, nil
		}
	}
}

// prevMismatch says why a record's prev is not the hash before it.
func prevMismatch(lineNo int, start chainStart) string {
	switch {
	case lineNo > 1:
		return fmt.Sprintf("prev mismatch: the record does not follow line %d (a record deleted, inserted or moved?)", lineNo-1)
	case start.after != "":
		return fmt.Sprintf("prev mismatch: the first record does not follow the last record of %s (a rotated file deleted or moved, or records deleted at the seam?)", start.after)
	}
	return "prev mismatch: the first record does not start a chain (records deleted from the start?)"
}

// check parses one line and returns what is wrong with it apart from its
// prev, "" when nothing is.
func check(line []byte, eof bool) (Record, string) {
	var rec Record
	if len(line) == 0 {
		return rec, "empty line: not an audit record"
	}
	if !json.Valid(line) {
		switch {
		case isTornRecord(line) && eof:
			return rec, "torn line: the file ends inside a record (a write cut short by a crash?)"
		case isTornRecord(line):
			return rec, "torn line: an incomplete record (a write cut short by a crash?); once checked, delete the line: the records after it chain to the one before it"
		}
		return rec, "not JSON"
	}
	if err := json.Unmarshal(line, &rec); err != nil {
		return rec, "not an audit record: " + err.Error()
	}
	claimed, computed, ok := splitHash(line)
	if !ok {
		return rec, `no hash: the record does not end with its "hash" field`
	}
	if claimed != computed {
		return rec, "hash mismatch: the record was changed after it was written"
	}
	return rec, ""
}
