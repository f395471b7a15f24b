// Package audit keeps a tamper-evident log of tool calls: one JSON object
// per line (JSON Lines), each record carrying the hash of the record before
// it, so that editing, deleting, inserting or reordering records breaks a
// chain that Verify (and "troupe audit verify FILE") checks.
//
// # Writing
//
//	l, err := audit.Open(path, audit.Options{}) // path: audit.DefaultPath()
//	...
//	rec, err := l.Append(audit.Record{Event: audit.EventCall, Tool: "repo.readFile", ...})
//	...
//	l.Close()
//
// Append fills Time (when zero), Prev and Hash, and returns the record as
// written. Several troupe processes (every Codex run starts its own stdio
// server) may append to one file at once: each append takes an exclusive
// flock(2) on the file, reads the last record's hash from the end of the
// file (a few KiB, never the whole file), writes its line with O_APPEND in
// one write(2), fsyncs, and unlocks. Within a process a mutex serialises
// Appends, so a Log is safe for concurrent use.
//
// # Record hash and chain
//
// A record's Hash is the lowercase hex SHA-256 of its canonical form: the
// line exactly as written, without its newline, with the hash value empty.
// The writer produces the line as encoding/json's encoding of Record with
// Hash "" (fields in struct order, no spaces, HTML characters escaped),
// which therefore ends in `,"hash":""}`, and then puts the hash between
// those quotes (it writes those bytes by hand, without reflection; its
// tests hold them to encoding/json's and to a log written before):
//
//	{"time":"…","event":"call",…,"prev":"<hash of the line before>","hash":"<64 hex digits>"}
//
// Verify hashes the bytes it reads, with the 64 hex digits of the final
// "hash" taken out, rather than re-encoding what it parsed. So every byte
// of a line but the hash itself is covered: a changed value, a field added
// anywhere (before "hash" it changes the hashed bytes, after it the line no
// longer ends in the hash), a key moved or re-spaced, an escape rewritten,
// all make the line fail. A later troupe that adds fields to Record writes
// logs an older Verify still accepts, since it never needs to know the
// fields to check the hash. Prev is the previous line's Hash, "" for the
// first line of a file, so a deleted, inserted or reordered line breaks
// the chain at the first line that no longer follows its predecessor.
//
// # Torn lines
//
// A crash (or a full disk) in the middle of a write can leave the file
// ending in part of a line. Such a torn line is not repaired or removed:
// an audit log is not edited. The next Append continues the chain from the
// last complete record and starts its record on a fresh line, so the
// fragment stays in the file as a line of its own and Verify reports it
// ("torn line"). Someone who has looked at it can delete that one line:
// the records after it chain to the one before it, and Verify passes
// again. Open and Append refuse a file whose last line is neither a record
// nor such a fragment (it is not an audit log, or it was damaged): they
// would otherwise chain onto something unverifiable.
//
// # Tamper-evident, not tamper-proof
//
// The chain proves that the file is internally consistent, not that it
// is the file troupe wrote. Whoever can write the file can rewrite it
// whole: edit a record and recompute every hash from there on (SHA-256
// needs no key), or drop the last records (the chain of the rest is
// intact), or delete the file. To catch that, anchor the chain outside the
// attacker's reach: copy the last record's hash (or the whole file) now
// and then to another machine, a commit, a ticket, a write-once store, and
// check later that the file still contains a record with that hash and a
// valid chain up to it. The file is created 0600 in a 0700 directory so
// that other users cannot read or write it; that is the protection against
// everyone but its owner and root.
//
// # Rotation
//
// To rotate, rename the file. Each Log notices at its next Append that the
// path names another file (or none) and continues in the new file, which
// starts a new chain (Prev ""). Anchor the old file's last hash if its
// end matters.
package audit

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"time"
)

// EventCall is the Event of the record written when a tools/call ends.
const EventCall = "call"

// Record is one line of the audit log: one finished tools/call, or, with
// other Event values, whatever later kinds of events need recording.
type Record struct {
	// Time is when the record was written (UTC); Append sets it when zero.
	Time time.Time `json:"time"`
	// Event is the kind of record: EventCall, or a later kind.
	Event string `json:"event"`
	// Session is the MCP session the call came in on.
	Session string `json:"session"`
	// Tool is the called tool's name.
	Tool string `json:"tool"`
	// ArgsHash is the hex SHA-256 of the canonical arguments (with cwd,
	// env and sandbox profile), computed by the caller: equal calls have
	// equal hashes, and the arguments themselves, which may hold secrets or
	// private data, stay out of the log.
	ArgsHash string `json:"args_hash"`
	// Cwd is the call's working directory, relative to the workspace.
	Cwd string `json:"cwd,omitempty"`
	// SessionCwd and SessionEnv are the working directory (relative to
	// the workspace) and the names of the environment variables the
	// session set for itself in initialize; their values never enter the
	// log. Empty when the session set none.
	SessionCwd string   `json:"session_cwd,omitempty"`
	SessionEnv []string `json:"session_env,omitempty"`
	// Sandbox is the sandbox profile the call ran under.
	Sandbox string `json:"sandbox,omitempty"`
	// TimeoutMs is the call's deadline, in milliseconds.
	TimeoutMs int64 `json:"timeout_ms,omitempty"`
	// Approval says whether and how the call was approved: not_required,
	// approved, trusted, denied, expired or unavailable.
	Approval string `json:"approval"`
	// Started and Stopped bound the call (UTC once written).
	Started time.Time `json:"started"`
	Stopped time.Time `json:"stopped"`
	// Outcome is "ok" or the error kind (deadline_exceeded, cancelled, …).
	Outcome string `json:"outcome"`
	// ExitStatus is a command tool's exit status, when it exited.
	ExitStatus *int `json:"exit_status,omitempty"`
	// StdoutBytes and StderrBytes count the output the tool produced.
	StdoutBytes int64 `json:"stdout_bytes"`
	StderrBytes int64 `json:"stderr_bytes"`
	// CorrelationID ties the record to the call's log lines and error
	// results.
	CorrelationID string `json:"correlation_id"`
	// Prev is the previous record's Hash, "" for a file's first record.
	// Append sets it.
	Prev string `json:"prev"`
	// Hash is the hex SHA-256 of this record's canonical form (the line
	// with Hash empty; see the package documentation). Append sets it.
	Hash string `json:"hash"`
}

// maxLine bounds a record's line, so that reading the log never needs more
// memory than this per line. Real records are well under 1 KiB.
const maxLine = 64 << 10

// hashLen is the length of a hex SHA-256.
const hashLen = 2 * sha256.Size

// emptyHashEnd ends every canonical form; a written line has the hash
// between its last two quotes, after hashKey.
const (
	emptyHashEnd = `,"hash":""}`
	hashKey      = `,"hash":"`
)

// DefaultPath is where the audit log lives unless configured otherwise:
// $XDG_STATE_HOME/troupe/audit.jsonl, else
// ~/.local/state/troupe/audit.jsonl. A relative XDG_STATE_HOME is ignored,
// as the XDG base directory specification asks.
func DefaultPath() (string, error) {
	if d := os.Getenv("XDG_STATE_HOME"); d != "" && filepath.IsAbs(d) {
		return filepath.Join(d, "troupe", "audit.jsonl"), nil
	}
	home, err := os.UserHomeDir()
	if err != nil {
		return "", fmt.Errorf("audit: default path: %w", err)
	}
	return filepath.Join(home, ".local", "state", "troupe", "audit.jsonl"), nil
}

// Options tune a Log. The zero value is the safe choice.
type Options struct {
	// NoSync skips the fsync after each append. A record then survives a
	// crash of troupe but may be lost (or torn) in a crash of the machine.
	// An append took 0.34 ms with the fsync and 0.04 ms without it on
	// ext4 on a virtual disk (BenchmarkAppend); slower disks take
	// longer. There is one record per tool call, which itself takes far
	// longer, so leave it on unless the disk is very slow.
	NoSync bool
}

// Log appends records to one audit file. It is safe for concurrent use by
// several goroutines, and the file is safe to share with other processes
// that append through this package.
type Log struct {
	path string
	opts Options

	mu sync.Mutex // serialises Append and Close within the process
	f  *os.File   // nil once closed
}

// Open opens the audit log at path for appending, creating its parent
// directories (0700) and the file (0600) as needed. It checks that the
// file's end is a record or a torn line (see the package documentation),
// and fails otherwise.
func Open(path string, opts Options) (*Log, error) {
	f, err := openFile(path)
	if err != nil {
		return nil, err
	}
	l := &Log{path: path, opts: opts, f: f}
	if err := lockFile(f); err != nil {
		f.Close()
		return nil, fmt.Errorf("audit %s: lock: %w", path, err)
	}
	_, _, err = lastHash(f)
	unlockFile(f)
	if err != nil {
		f.Close()
		return nil, fmt.Errorf("audit %s: %w", path, err)
	}
	return l, nil
}

func openFile(path string) (*os.File, error) {
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		return nil, fmt.Errorf("audit %s: %w", path, err)
	}
	// O_RDWR, not O_WRONLY: Append reads the last record to chain to it.
	f, err := os.OpenFile(path, os.O_RDWR|os.O_APPEND|os.O_CREATE, 0o600)
	if err != nil {
		return nil, fmt.Errorf("audit %s: %w", path, err)
	}
	return f, nil
}

// Path is the file the Log appends to.
func (l *Log) Path() string { return l.path }

// Append writes r as the log's next record and returns it as written:
// Time set to now when zero, times in UTC, Prev and Hash filled in (any
// given are ignored). r.Event must not be empty.
func (l *Log) Append(r Record) (Record, error) {
	lines, err := l.append([]Record{r})
	if err != nil {
		return Record{}, err
	}
	// The record as a reader will see it: encoding/json may have replaced
	// invalid UTF-8, and Hash is now set.
	var written Record
	if err := json.Unmarshal(bytes.TrimPrefix(lines, []byte{'\n'}), &written); err != nil {
		return Record{}, fmt.Errorf("audit %s: %w", l.path, err)
	}
	return written, nil
}

// AppendAll writes rs, in order, as the log's next records, with one lock,
// one write and one fsync for all of them: a writer that has several
// records waiting (a busy server's calls) pays the disk's latency once per
// batch instead of once per record. The records are filled in as by
// Append. A failed write may leave a torn line, which the next append
// and Verify handle as the package documentation describes.
func (l *Log) AppendAll(rs []Record) error {
	if len(rs) == 0 {
		return nil
	}
	_, err := l.append(rs)
	return err
}

// append chains rs after the file's last record and writes them in one
// write, returning the bytes written.
func (l *Log) append(rs []Record) ([]byte, error) {
	for _, r := range rs {
		if r.Event == "" {
			return nil, fmt.Errorf("audit %s: record without an event", l.path)
		}
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.f == nil {
		return nil, fmt.Errorf("audit %s: %w", l.path, os.ErrClosed)
	}
	if err := l.lock(); err != nil {
		return nil, fmt.Errorf("audit %s: %w", l.path, err)
	}
	defer unlockFile(l.f)

	prev, torn, err := lastHash(l.f)
	if err != nil {
		return nil, fmt.Errorf("audit %s: %w", l.path, err)
	}
	out := make([]byte, 0, len(rs)*512) // a call's record is about 400 bytes
	if torn {
		out = append(out, '\n') // leave the fragment its own line
	}
	now := time.Now()
	prevHash := []byte(prev)
	for _, r := range rs {
		if r.Time.IsZero() {
			r.Time = now
		}
		r.Time, r.Started, r.Stopped = r.Time.UTC(), r.Started.UTC(), r.Stopped.UTC()
		if out, err = appendLine(out, &r, prevHash); err != nil {
			return nil, fmt.Errorf("audit %s: %w", l.path, err)
		}
		prevHash = out[len(out)-hashLen-3 : len(out)-3 : len(out)-3] // appends never write over it
	}
	// One write: with O_APPEND the lines land whole at the end, after
	// anything another process appended before we took the lock.
	if _, err := l.f.Write(out); err != nil {
		return nil, fmt.Errorf("audit %s: %w", l.path, err)
	}
	if !l.opts.NoSync {
		if err := l.f.Sync(); err != nil {
			return nil, fmt.Errorf("audit %s: %w", l.path, err)
		}
	}
	return out, nil
}

// lock takes the file lock, first following the path to a new file if the
// old one was renamed or deleted (rotation).
func (l *Log) lock() error {
	for range 3 {
		if err := lockFile(l.f); err != nil {
			return fmt.Errorf("lock: %w", err)
		}
		have, err1 := l.f.Stat()
		now, err2 := os.Stat(l.path)
		if err1 == nil && err2 == nil && os.SameFile(have, now) {
			return nil
		}
		unlockFile(l.f)
		f, err := openFile(l.path)
		if err != nil {
			return err
		}
		l.f.Close()
		l.f = f
	}
	return errors.New("the file keeps being replaced")
}

// Close closes the file. Appends after Close fail.
func (l *Log) Close() error {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.f == nil {
		return nil
	}
	err := l.f.Close()
	l.f = nil
	if err != nil {
		return fmt.Errorf("audit %s: %w", l.path, err)
	}
	return nil
}

// splitHash checks that line (without newline) ends in a hash field and
// returns that hash and the line's hash: the SHA-256 of its canonical form.
func splitHash(line []byte) (claimed, computed string, ok bool) {
	n := len(line) - hashLen - 2 // start of the hex digits
	if n < len(hashKey) || !bytes.HasSuffix(line, []byte(`"}`)) || string(line[n-len(hashKey):n]) != hashKey {
		return "", "", false
	}
	claimed = string(line[n : n+hashLen])
	if !isHex(claimed) {
		return "", "", false
	}
	h := sha256.New()
	h.Write(line[:n])
	h.Write([]byte(`"}`))
	return claimed, hex.EncodeToString(h.Sum(nil)), true
}

func isHex(s string) bool {
	for i := range len(s) {
		if c := s[i]; (c < '0' || c > '9') && (c < 'a' || c > 'f') {
			return false
		}
	}
	return true
}

// recordStart begins every line the writer writes.
const recordStart = `{"time":"`

// isTornRecord reports whether line could be a record cut short: it is not
// JSON, and starts as every record does.
func isTornRecord(line []byte) bool {
	if len(line) == 0 || json.Valid(line) {
		return false
	}
	if len(line) < len(recordStart) {
		return bytes.HasPrefix([]byte(recordStart), line)
	}
	return bytes.HasPrefix(line, []byte(recordStart))
}

// tailWindow is how much of the file's end lastHash reads first; it reads
// more only when torn lines (or a long record) fill it.
const tailWindow = 4 << 10

// lastHash returns the Hash of the file's last complete record ("" if it
// has none) and whether the file ends inside a line, so that the next
// record must begin with a newline. Torn lines at the end are skipped.
// It reads the file's end only; the caller holds the lock.
func lastHash(f *os.File) (prev string, torn bool, err error) {
	fi, err := f.Stat()
	if err != nil {
		return "", false, err
	}
	size := fi.Size()
	for window := int64(tailWindow); ; window *= 4 {
		n := min(window, size)
		buf := make([]byte, n)
		if _, err := f.ReadAt(buf, size-n); err != nil {
			return "", false, fmt.Errorf("read the last record: %w", err)
		}
		if n == 0 {
			return "", false, nil
		}
		torn = buf[n-1] != '\n'
		whole := n == size // buf starts at a line's start
		lines := bytes.Split(bytes.TrimSuffix(buf, []byte{'\n'}), []byte{'\n'})
		if !whole {
			lines = lines[1:] // the first may be the end of a longer line
		}
		for i := len(lines) - 1; i >= 0; i-- {
			line := lines[i]
			if isTornRecord(line) {
				continue
			}
			claimed, _, ok := splitHash(line)
			if !ok || !json.Valid(line) {
				return "", false, errors.New("the last line is not an audit record (check the file with troupe audit verify)")
			}
			return claimed, torn, nil
		}
		if whole {
			return "", torn, nil // nothing but torn lines
		}
		if window >= 4*maxLine {
			return "", false, fmt.Errorf("no complete record in the last %d bytes", n)
		}
	}
}
