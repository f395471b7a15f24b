// Package audit keeps a tamper-evident log of tool calls: one JSON object
// per line (JSON Lines), each record carrying the hash of the record before
// it, so that editing, deleting, inserting or reordering records breaks a
// chain that VerifyLog (and "troupe audit verify FILE") checks, across
// the files of a rotated log.
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
// Appends, so a Log is safe for concurrent use. Options.MaxBytes rotates
// the file by size (see Rotation).
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
// fields to check the hash. Prev is the previous line's Hash (the last
// line of the file rotated before, on a file's first line; "" for the
// log's very first), so a deleted, inserted or reordered line breaks the
// chain at the first line that no longer follows its predecessor.
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
// With Options.MaxBytes set, an append that would take the file past that
// size first renames it to PATH.1, after moving each older PATH.n to
// PATH.n+1 and deleting those past Options.MaxFiles (logrotate's naming:
// PATH.1 is the newest rotated file, the highest number the oldest). It
// then writes into a new PATH, whose first record links (Prev) to the
// last record of PATH.1, so the chain runs on across files. Whoever finds
// PATH without a complete record (a new file, or one renamed or deleted
// by hand) chains to PATH.1's last record the same way; only a log with
// no PATH.1 starts a chain with Prev "".
//
// Rotation happens under the file's lock, and an appender checks, once it
// holds the lock, that the path still names the file it has open (or it
// reopens the path and locks that): so another Log, in this process or
// another, that waited for the lock continues in the new file, no record
// lands in a file once it is rotated, and the chain stays one line. The
// size the check needs comes from that same fstat, so rotation costs an
// append nothing until it is due.
//
// VerifyLog (and "troupe audit verify") checks the chain across PATH's
// files in order (Files), and names the file and line where it breaks.
// Once MaxFiles has deleted the oldest files, the oldest kept one begins
// with a link to a record that is gone: VerifyLog checks the chain from
// there and reports that hash (LogReport.Start); anchor it, or the last
// hash, elsewhere if the deleted part matters.
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

	"troupe/internal/flock"
	"troupe/internal/statedir"
)

// EventCall is the Event of the record written when a tools/call ends.
const EventCall = "call"

// The Events of pin records (Record.Pin): a downstream tool or prompt
// pinned at first use, changed since it was pinned (held, or asked
// about), listed as pinned again, and a changed version accepted.
const (
	EventPinned   = "pin_first_use"
	EventChanged  = "pin_changed"
	EventRestored = "pin_restored"
	EventAccepted = "pin_accepted"
)

// Pin is what a pin record says of a downstream tool or prompt.
type Pin struct {
	// Server is its server's name in [mcp_servers].
	Server string `json:"server"`
	// Kind is "tool" or "prompt".
	Kind string `json:"kind"`
	// Version is the hash (pins.Def.Hash) of the version now pinned
	// (first use, restored, accepted) or seen and not trusted (changed).
	Version string `json:"version"`
	// Change says what changed since the pinned version ("description
	// and input schema changed"); empty for first use and restored.
	Change string `json:"change,omitempty"`
	// Mode is the server's on_change when it changed: hold, ask, accept.
	Mode string `json:"mode,omitempty"`
	// By is who accepted: an operator's identity ("token:ops",
	// "local:alice") or on_change = "accept".
	By string `json:"by,omitempty"`
}

// Record is one line of the audit log: one finished tools/call, or, with
// other Event values, whatever later kinds of events need recording.
type Record struct {
	// Time is when the record was written (UTC); Append sets it when zero.
	Time time.Time `json:"time"`
	// Event is the kind of record: EventCall, or a later kind.
	Event string `json:"event"`
	// Session is the MCP session the call came in on.
	Session string `json:"session"`
	// Identity is who called (identity.Identity.String: "token:<name>",
	// "oauth:<subject>", "local" over stdio, "anonymous"), never a
	// credential. Empty (left out) in records written before it existed,
	// which still verify.
	Identity string `json:"identity,omitempty"`
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
	// Sampling counts the sampling/createMessage requests of a downstream
	// server that the call relayed to its client (during the call, or as
	// an input_required round), each also logged with the server's name;
	// 0 (left out) for calls that relayed none.
	Sampling int64 `json:"sampling,omitempty"`
	// Pin is set on the records of a downstream tool's or prompt's pin
	// (Event EventPinned, EventChanged, EventRestored, EventAccepted;
	// package pins): Tool is then its name on its server.
	Pin *Pin `json:"pin,omitempty"`
	// CorrelationID ties the record to the call's log lines and error
	// results.
	CorrelationID string `json:"correlation_id"`
	// Prev is the previous record's Hash: on a file's first record, the
	// last of the file rotated before it, "" when there is none. Append
	// sets it.
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
	dir, err := statedir.Dir()
	if err != nil {
		return "", fmt.Errorf("audit: default path: %w", err)
	}
	return filepath.Join(dir, "audit.jsonl"), nil
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
	// MaxBytes rotates the file before an append would take it past this
	// size (see the package documentation); 0 never rotates. A batch
	// larger than MaxBytes is written whole into a fresh file.
	MaxBytes int64
	// MaxFiles is how many rotated files (PATH.1 … PATH.MaxFiles) a
	// rotation keeps; older ones are deleted. Less than 1 counts as 1.
	MaxFiles int
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
	size, err := l.lock()
	if err != nil {
		l.f.Close()
		return nil, fmt.Errorf("audit %s: %w", path, err)
	}
	_, _, err = l.tail(size)
	flock.Unlock(l.f)
	if err != nil {
		l.f.Close()
		return nil, err
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

// append chains rs after the log's last record and writes them in one
// write, returning the bytes written. When the lines would take the file
// past MaxBytes it rotates first, and writes them into the new file.
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
	for rotations := 0; ; rotations++ {
		size, err := l.lock()
		if err != nil {
			return nil, fmt.Errorf("audit %s: %w", l.path, err)
		}
		out, err := l.encode(rs, size)
		if err != nil {
			flock.Unlock(l.f)
			return nil, err
		}
		// size > 0: a batch larger than MaxBytes goes whole into a fresh
		// file rather than rotating forever. The new file may have been
		// filled by other appenders before this one got its lock, so it
		// may rotate again; the bound is only a guard.
		if l.opts.MaxBytes > 0 && size > 0 && size+int64(len(out)) > l.opts.MaxBytes && rotations < 8 {
			err := l.rotate()
			flock.Unlock(l.f)
			if err != nil {
				return nil, fmt.Errorf("audit %s: rotate: %w", l.path, err)
			}
			continue // lock follows the path to the new file
		}
		err = l.write(out)
		flock.Unlock(l.f)
		if err != nil {
			return nil, fmt.Errorf("audit %s: %w", l.path, err)
		}
		return out, nil
	}
}

// encode returns rs's lines chained after the log's last record, with a
// newline first when the file ends in a torn line; under the lock, size
// being the file's.
func (l *Log) encode(rs []Record, size int64) ([]byte, error) {
	prev, torn, err := l.tail(size)
	if err != nil {
		return nil, err
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
	return out, nil
}

// write writes out at the file's end and syncs it; under the lock.
func (l *Log) write(out []byte) error {
	// One write: with O_APPEND the lines land whole at the end, after
	// anything another process appended before we took the lock.
	if _, err := l.f.Write(out); err != nil {
		return err
	}
	if !l.opts.NoSync {
		return l.f.Sync()
	}
	return nil
}

// tail returns the hash the next record links to and whether the file
// ends in a torn line; under the lock, size being the file's. A file
// without a complete record continues the chain of the file rotated
// before it (PATH.1), when there is one.
func (l *Log) tail(size int64) (prev string, torn bool, err error) {
	prev, torn, err = lastHash(l.f, size)
	if err != nil {
		return "", false, fmt.Errorf("audit %s: %w", l.path, err)
	}
	if prev != "" {
		return prev, torn, nil
	}
	prev, err = lastHashOf(rotatedName(l.path, 1))
	return prev, torn, err
}

// lock takes the file lock, first following the path to a new file if the
// old one was renamed or deleted (rotation, here or in another process),
// and returns the size of the file it locked. The fstat that tells whether
// the file is still the path's also gives the size, so rotation by size
// costs an append no extra system call.
func (l *Log) lock() (int64, error) {
	// Each retry means another appender rotated (or someone replaced the
	// file) meanwhile: progress elsewhere, which only a log rotated every
	// few records sees more than once. The bound is for a path that
	// cannot be held at all.
	for range 100 {
		if err := flock.Lock(l.f); err != nil {
			return 0, fmt.Errorf("lock: %w", err)
		}
		have, err1 := l.f.Stat()
		now, err2 := os.Stat(l.path)
		if err1 == nil && err2 == nil && os.SameFile(have, now) {
			return have.Size(), nil
		}
		flock.Unlock(l.f)
		f, err := openFile(l.path)
		if err != nil {
			return 0, err
		}
		l.f.Close()
		l.f = f
	}
	return 0, errors.New("the file keeps being replaced")
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
// It reads the file's end only, size being the file's; the caller holds
// the lock.
func lastHash(f *os.File, size int64) (prev string, torn bool, err error) {
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
