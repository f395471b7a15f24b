package audit

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"
)

// helperEnv makes the test binary an appender for
// TestConcurrentProcesses: "path count [max_bytes]" appends count records
// to path (rotating at max_bytes), as soon as path+".go" exists (so that
// the processes start together).
const helperEnv = "AUDIT_TEST_APPENDER"

func TestMain(m *testing.M) {
	if spec := os.Getenv(helperEnv); spec != "" {
		os.Exit(appender(spec))
	}
	os.Exit(m.Run())
}

func appender(spec string) int {
	path, rest, _ := strings.Cut(spec, " ")
	count, maxBytes, _ := strings.Cut(rest, " ")
	n, _ := strconv.Atoi(count)
	mb, _ := strconv.ParseInt(maxBytes, 10, 64)
	l, err := Open(path, Options{NoSync: true, MaxBytes: mb, MaxFiles: 1000})
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	defer l.Close()
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(time.Millisecond) {
		if _, err := os.Stat(path + ".go"); err == nil {
			break
		} else if time.Now().After(deadline) {
			fmt.Fprintln(os.Stderr, "appender: no start signal")
			return 1
		}
	}
	for i := range n {
		if _, err := l.Append(Record{Event: EventCall, Tool: "proc", Session: strconv.Itoa(os.Getpid()), CorrelationID: strconv.Itoa(i)}); err != nil {
			fmt.Fprintln(os.Stderr, err)
			return 1
		}
	}
	return 0
}

func call(i int) Record {
	exit := i % 3
	return Record{
		Event: EventCall, Session: "s1", Tool: fmt.Sprintf("t%d", i), ArgsHash: strings.Repeat("ab", 32),
		Cwd: "sub/dir", Sandbox: "workspace-write", TimeoutMs: 30_000, Approval: "approved",
		Started: time.Date(2025, 1, 2, 3, 4, 5, 6, time.FixedZone("X", 3600)), Stopped: time.Now(),
		Outcome: "ok", ExitStatus: &exit, StdoutBytes: int64(10 * i), StderrBytes: 1, CorrelationID: fmt.Sprintf("c%d", i),
	}
}

func verifyFile(t *testing.T, path string) (int, error) {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	return Verify(f)
}

func mustVerify(t *testing.T, path string, want int) {
	t.Helper()
	n, err := verifyFile(t, path)
	if err != nil || n != want {
		t.Fatalf("Verify = %d, %v; want %d records, no error", n, err, want)
	}
}

// newLog opens a log in a fresh directory, written without fsync (the
// tests do not crash the machine).
func newLog(t *testing.T) (*Log, string) {
	t.Helper()
	path := filepath.Join(t.TempDir(), "state", "troupe", "audit.jsonl")
	l, err := Open(path, Options{NoSync: true})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { l.Close() })
	return l, path
}

func writeLog(t *testing.T, n int) (string, []Record) {
	t.Helper()
	l, path := newLog(t)
	var recs []Record
	for i := range n {
		r, err := l.Append(call(i))
		if err != nil {
			t.Fatal(err)
		}
		recs = append(recs, r)
	}
	return path, recs
}

func TestAppendAndVerify(t *testing.T) {
	path, recs := writeLog(t, 5)
	mustVerify(t, path, 5)
	for i, r := range recs {
		want := ""
		if i > 0 {
			want = recs[i-1].Hash
		}
		if r.Prev != want || len(r.Hash) != 64 || r.Time.IsZero() || r.Time.Location() != time.UTC || r.Started.Location() != time.UTC {
			t.Fatalf("record %d: prev %q hash %q time %v started %v", i, r.Prev, r.Hash, r.Time, r.Started)
		}
		if r.Tool != fmt.Sprintf("t%d", i) || *r.ExitStatus != i%3 || !r.Started.Equal(call(i).Started) {
			t.Fatalf("record %d not as given: %+v", i, r)
		}
	}
	for p, want := range map[string]os.FileMode{path: 0o600, filepath.Dir(path): 0o700} {
		if fi, err := os.Stat(p); err != nil || fi.Mode().Perm() != want {
			t.Fatalf("%s: mode %v, %v; want %v", p, fi.Mode().Perm(), err, want)
		}
	}
	data, _ := os.ReadFile(path)
	if lines := strings.Split(string(data), "\n"); len(lines) != 6 || lines[5] != "" || !strings.HasPrefix(lines[0], `{"time":"`) {
		t.Fatalf("want 5 lines each ending in a newline:\n%s", data)
	}
}

func TestAppendChecksItsInput(t *testing.T) {
	l, path := newLog(t)
	if _, err := l.Append(Record{}); err == nil {
		t.Fatal("a record without an event must be refused")
	}
	if _, err := l.Append(Record{Event: "call", Tool: strings.Repeat("x", maxLine)}); err == nil {
		t.Fatal("a record larger than a line may be must be refused")
	}
	// Invalid UTF-8 is replaced by encoding/json; the returned record says
	// so, and the line verifies.
	r, err := l.Append(Record{Event: "call", Tool: "bad\xffutf8 <&>"})
	if err != nil || r.Tool != "bad\uFFFDutf8 <&>" {
		t.Fatalf("Append = %q, %v", r.Tool, err)
	}
	mustVerify(t, path, 1)
	l.Close()
	if _, err := l.Append(Record{Event: "call"}); !errors.Is(err, os.ErrClosed) {
		t.Fatalf("Append after Close: %v", err)
	}
}

func TestOpenContinuesTheChain(t *testing.T) {
	path, recs := writeLog(t, 2)
	l, err := Open(path, Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	r, err := l.Append(call(9))
	if err != nil {
		t.Fatal(err)
	}
	if r.Prev != recs[1].Hash {
		t.Fatalf("prev %q, want the last record's hash %q", r.Prev, recs[1].Hash)
	}
	mustVerify(t, path, 3)
}

func TestConcurrentAppends(t *testing.T) {
	l, path := newLog(t)
	// A second Log on the same file in the same process: its own open
	// file, so the flock (not only the mutex) must keep them apart.
	l2, err := Open(path, Options{NoSync: true})
	if err != nil {
		t.Fatal(err)
	}
	defer l2.Close()
	var wg sync.WaitGroup
	for g := range 8 {
		wg.Go(func() {
			log := l
			if g%2 == 1 {
				log = l2
			}
			for i := range 25 {
				if _, err := log.Append(call(i)); err != nil {
					t.Error(err)
					return
				}
			}
		})
	}
	wg.Wait()
	mustVerify(t, path, 200)
}

func TestConcurrentProcesses(t *testing.T) {
	l, path := newLog(t)
	const procs, each = 4, 100
	cmds := startAppenders(t, path, procs, each, 0)
	for i := range each { // and this process at the same time
		if _, err := l.Append(call(i)); err != nil {
			t.Fatal(err)
		}
	}
	for _, cmd := range cmds {
		if err := cmd.Wait(); err != nil {
			t.Fatalf("appender: %v", err)
		}
	}
	mustVerify(t, path, (procs+1)*each)
	// How often the writer changed from one line to the next: the test
	// only proves something when the processes really interleaved.
	switches, last := 0, ""
	for _, line := range lines(t, path) {
		writer := line[strings.Index(line, `"session"`):strings.Index(line, `"tool"`)]
		if writer != last {
			switches++
		}
		last = writer
	}
	t.Logf("%d records, the writer changed %d times", (procs+1)*each, switches)
}

// startAppenders starts procs processes that each append each records to
// path (appender), and lets them start.
func startAppenders(t *testing.T, path string, procs, each int, maxBytes int64) []*exec.Cmd {
	t.Helper()
	var cmds []*exec.Cmd
	t.Cleanup(func() {
		for _, cmd := range cmds {
			if cmd.ProcessState == nil {
				cmd.Process.Kill()
				cmd.Wait()
			}
		}
	})
	for range procs {
		cmd := exec.Command(os.Args[0])
		cmd.Env = append(os.Environ(), fmt.Sprintf("%s=%s %d %d", helperEnv, path, each, maxBytes))
		cmd.Stderr = os.Stderr
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		cmds = append(cmds, cmd)
	}
	if err := os.WriteFile(path+".go", nil, 0o600); err != nil {
		t.Fatal(err)
	}
	return cmds
}

// lines reads the log as lines, each with its newline but the last.
func lines(t *testing.T, path string) []string {
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return strings.SplitAfter(strings.TrimSuffix(string(data), "\n"), "\n")
}

func TestVerifyFindsTampering(t *testing.T) {
	path, recs := writeLog(t, 5)
	orig := lines(t, path)
	for _, c := range []struct {
		name   string
		change func(l []string) []string
		line   int
		reason string
	}{
		{"edited field", func(l []string) []string {
			l[2] = strings.Replace(l[2], `"tool":"t2"`, `"tool":"tX"`, 1)
			return l
		}, 3, "hash mismatch"},
		{"edited number", func(l []string) []string {
			l[1] = strings.Replace(l[1], `"stdout_bytes":10`, `"stdout_bytes":0`, 1)
			return l
		}, 2, "hash mismatch"},
		{"deleted line", func(l []string) []string { return append(l[:2:2], l[3:]...) }, 3, "prev mismatch"},
		{"deleted first line", func(l []string) []string { return l[1:] }, 1, "prev mismatch"},
		{"swapped lines", func(l []string) []string {
			l[1], l[2] = l[2], l[1]
			return l
		}, 2, "prev mismatch"},
		{"added field", func(l []string) []string {
			l[2] = strings.Replace(l[2], `{"time"`, `{"note":"x","time"`, 1)
			return l
		}, 3, "hash mismatch"},
		{"added field after the hash", func(l []string) []string {
			l[2] = strings.Replace(l[2], `"}`+"\n", `","note":"x"}`+"\n", 1)
			return l
		}, 3, "no hash"},
		{"inserted line", func(l []string) []string {
			return append(l[:3:3], append([]string{l[1]}, l[3:]...)...)
		}, 4, "prev mismatch"},
		{"torn last line", func(l []string) []string {
			l[4] = l[4][:len(l[4])/2]
			return l
		}, 5, "torn line: the file ends inside a record"},
		{"not JSON", func(l []string) []string { return append(l[:1:1], append([]string{"hello\n"}, l[1:]...)...) }, 2, "not JSON"},
		{"not a record", func(l []string) []string {
			l[0] = `{"time":42}` + "\n"
			return l
		}, 1, "not an audit record"},
		{"empty line", func(l []string) []string { return append(l[:1:1], append([]string{"\n"}, l[1:]...)...) }, 2, "empty line"},
		{"edited and rehashed", func(l []string) []string {
			r := recs[2]
			r.Tool, r.Hash = "tX", ""
			line, err := appendLine(nil, &r, []byte(r.Prev))
			if err != nil {
				t.Fatal(err)
			}
			l[2] = string(line)
			return l
		}, 4, "prev mismatch"},
	} {
		t.Run(c.name, func(t *testing.T) {
			changed := strings.Join(c.change(append([]string(nil), orig...)), "")
			n, err := Verify(strings.NewReader(changed))
			var ve *VerifyError
			if !errors.As(err, &ve) || ve.Line != c.line || !strings.Contains(ve.Reason, c.reason) {
				t.Fatalf("Verify = %d, %v; want line %d: %s", n, err, c.line, c.reason)
			}
			if n != c.line-1 {
				t.Fatalf("Verify counted %d records, want the %d before the bad line", n, c.line-1)
			}
		})
	}
}

func TestVerifyAcceptsAMissingFinalNewline(t *testing.T) {
	path, _ := writeLog(t, 3)
	data, _ := os.ReadFile(path)
	if n, err := Verify(bytes.NewReader(bytes.TrimSuffix(data, []byte("\n")))); n != 3 || err != nil {
		t.Fatalf("Verify = %d, %v", n, err)
	}
	if n, err := Verify(strings.NewReader("")); n != 0 || err != nil {
		t.Fatalf("empty log: %d, %v", n, err)
	}
}

// TestTornLine: after a crash mid-write, Open accepts the file, Append
// chains to the last complete record on a fresh line, Verify reports the
// fragment, and deleting that line makes the log verify.
// TestAppendAll writes a batch between single appends, one batch after a
// torn line: the chain runs through every record, in order.
func TestAppendAll(t *testing.T) {
	l, path := newLog(t)
	if _, err := l.Append(call(0)); err != nil {
		t.Fatal(err)
	}
	if err := l.AppendAll([]Record{call(1), call(2), call(3)}); err != nil {
		t.Fatal(err)
	}
	if err := l.AppendAll(nil); err != nil {
		t.Fatalf("an empty batch: %v", err)
	}
	last, err := l.Append(call(4))
	if err != nil {
		t.Fatal(err)
	}
	mustVerify(t, path, 5)
	if last.Tool != "t4" {
		t.Fatalf("last record %+v", last)
	}
	if err := l.AppendAll([]Record{call(5), {Tool: "no event"}}); err == nil {
		t.Fatal("a batch with a record without an event was written")
	}
	mustVerify(t, path, 5)

	f, _ := os.OpenFile(path, os.O_WRONLY|os.O_APPEND, 0)
	f.WriteString(`{"time":"2025-01-01T00:00:00Z","event":"ca`)
	f.Close()
	if err := l.AppendAll([]Record{call(6), call(7)}); err != nil {
		t.Fatal(err)
	}
	ls := lines(t, path)
	if len(ls) != 8 || !strings.Contains(ls[6], `"tool":"t6"`) || !strings.Contains(ls[7], `"tool":"t7"`) {
		t.Fatalf("want the batch after the torn line, got %q", ls)
	}
	os.WriteFile(path, []byte(strings.Join(append(ls[:5:5], ls[6:]...), "")), 0o600)
	mustVerify(t, path, 7)
}

func TestTornLine(t *testing.T) {
	path, recs := writeLog(t, 2)
	f, _ := os.OpenFile(path, os.O_WRONLY|os.O_APPEND, 0)
	f.WriteString(`{"time":"2025-01-01T00:00:00Z","event":"ca`)
	f.Close()

	l, err := Open(path, Options{NoSync: true})
	if err != nil {
		t.Fatalf("Open after a torn write: %v", err)
	}
	defer l.Close()
	r, err := l.Append(call(7))
	if err != nil {
		t.Fatal(err)
	}
	if r.Prev != recs[1].Hash {
		t.Fatalf("prev %q, want the last complete record's %q", r.Prev, recs[1].Hash)
	}
	if _, err := l.Append(call(8)); err != nil {
		t.Fatal(err)
	}
	n, err := verifyFile(t, path)
	var ve *VerifyError
	if !errors.As(err, &ve) || ve.Line != 3 || !strings.Contains(ve.Reason, "torn line") || n != 2 {
		t.Fatalf("Verify = %d, %v; want the torn line 3", n, err)
	}
	ls := lines(t, path)
	if len(ls) != 5 {
		t.Fatalf("want 5 lines, got %q", ls)
	}
	os.WriteFile(path, []byte(strings.Join(append(ls[:2:2], ls[3:]...), "")), 0o600)
	mustVerify(t, path, 4)
}

func TestOpenRefusesWhatIsNotAnAuditLog(t *testing.T) {
	dir := t.TempDir()
	for name, content := range map[string]string{
		"text":       "hello\nworld\n",
		"json":       `{"a":1}` + "\n",
		"empty line": "\n",
	} {
		path := filepath.Join(dir, strings.ReplaceAll(name, " ", "_"))
		os.WriteFile(path, []byte(content), 0o600)
		if l, err := Open(path, Options{}); err == nil {
			l.Close()
			t.Errorf("%s: Open accepted %q", name, content)
		}
	}
	// Only torn lines: a crash during the very first write.
	path := filepath.Join(dir, "torn")
	os.WriteFile(path, []byte(`{"ti`), 0o600)
	l, err := Open(path, Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	if r, err := l.Append(call(0)); err != nil || r.Prev != "" {
		t.Fatalf("Append = %+v, %v", r, err)
	}
}

// TestLongTail: the last record is found behind torn lines longer than the
// first read of the file's end.
func TestLongTail(t *testing.T) {
	path, recs := writeLog(t, 1)
	f, _ := os.OpenFile(path, os.O_WRONLY|os.O_APPEND, 0)
	f.WriteString(`{"time":"` + strings.Repeat("x", 3*tailWindow) + "\n" + `{"time":"` + strings.Repeat("y", 5*tailWindow))
	f.Close()
	l, err := Open(path, Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	if r, err := l.Append(call(1)); err != nil || r.Prev != recs[0].Hash {
		t.Fatalf("Append = %q, %v; want prev %q", r.Prev, err, recs[0].Hash)
	}
}

// TestRenamedFileContinues: a file renamed to PATH.1 by hand (as
// rotation does), or deleted, is followed; the new file's first record
// links to PATH.1's last.
func TestRenamedFileContinues(t *testing.T) {
	l, path := newLog(t)
	r0, err := l.Append(call(0))
	if err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(path, path+".1"); err != nil {
		t.Fatal(err)
	}
	r1, err := l.Append(call(1))
	if err != nil || r1.Prev != r0.Hash {
		t.Fatalf("after the rename: prev %q, %v; want %q", r1.Prev, err, r0.Hash)
	}
	mustVerifyLog(t, path, 2, "")
	os.Remove(path)
	if r2, err := l.Append(call(2)); err != nil || r2.Prev != r0.Hash {
		t.Fatalf("after the delete: prev %q, %v; want %q", r2.Prev, err, r0.Hash)
	}
	mustVerifyLog(t, path, 2, "")
}

func mustVerifyLog(t *testing.T, path string, want int, start string) LogReport {
	t.Helper()
	rep, err := VerifyLog(path)
	if err != nil || rep.Records != want || rep.Start != start {
		t.Fatalf("VerifyLog = %+v, %v; want %d records from %q", rep, err, want, start)
	}
	return rep
}

// recordSize is the length of call(i)'s line for small i.
func recordSize(t *testing.T) int64 {
	r := call(1)
	line, err := appendLine(nil, &r, []byte(strings.Repeat("0", 64)))
	if err != nil {
		t.Fatal(err)
	}
	return int64(len(line))
}

// TestRotationBySize: the file is rotated before an append would take it
// past MaxBytes; each file's first record links to the last of the file
// before; MaxFiles rotated files are kept and older ones deleted, and
// VerifyLog then starts from the oldest kept file's link.
func TestRotationBySize(t *testing.T) {
	size := recordSize(t)
	path := filepath.Join(t.TempDir(), "audit.jsonl")
	maxBytes := 4*size + size/2 // 4 records a file
	l, err := Open(path, Options{NoSync: true, MaxBytes: maxBytes, MaxFiles: 3})
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	var recs []Record
	for i := range 9 {
		r, err := l.Append(call(i))
		if err != nil {
			t.Fatal(err)
		}
		recs = append(recs, r)
	}
	// 9 records: .2 holds 0-3, .1 holds 4-7, the log 8.
	files, err := Files(path)
	if want := []string{path + ".2", path + ".1", path}; err != nil || !slices.Equal(files, want) {
		t.Fatalf("Files = %q, %v; want %q", files, err, want)
	}
	for i, name := range files {
		ls := lines(t, name)
		if fi, _ := os.Stat(name); fi.Size() > maxBytes {
			t.Errorf("%s: %d bytes, more than %d", name, fi.Size(), maxBytes)
		}
		if first := recs[4*i]; !strings.Contains(ls[0], first.Hash) {
			t.Errorf("%s starts with %s, want record %d", name, ls[0], 4*i)
		}
	}
	if recs[4].Prev != recs[3].Hash || recs[8].Prev != recs[7].Hash {
		t.Fatal("a new file's first record does not link to the old file's last")
	}
	rep := mustVerifyLog(t, path, 9, "")
	if len(rep.Files) != 3 {
		t.Fatalf("VerifyLog checked %q", rep.Files)
	}
	// The old Verify sees one file: the log's first record continues .1.
	if _, err := verifyFile(t, path); err == nil || !strings.Contains(err.Error(), "line 1: prev mismatch") {
		t.Fatalf("Verify of the log alone: %v", err)
	}

	// Three more rotations: .3 is the oldest kept, the two before it are
	// gone, and the chain is checked from the link of its first record.
	for i := 9; i < 21; i++ {
		r, err := l.Append(call(i))
		if err != nil {
			t.Fatal(err)
		}
		recs = append(recs, r)
	}
	files, _ = Files(path)
	if want := []string{path + ".3", path + ".2", path + ".1", path}; !slices.Equal(files, want) {
		t.Fatalf("Files = %q; want %q", files, want)
	}
	// .3 holds 8-11 (the log's records 8..11 before three rotations).
	mustVerifyLog(t, path, 13, recs[7].Hash)
}

// TestRotationNever: MaxBytes 0 keeps one file however long.
func TestRotationNever(t *testing.T) {
	path := filepath.Join(t.TempDir(), "audit.jsonl")
	l, err := Open(path, Options{NoSync: true, MaxFiles: 1})
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	for i := range 50 {
		if _, err := l.Append(call(i)); err != nil {
			t.Fatal(err)
		}
	}
	if files, _ := Files(path); len(files) != 1 {
		t.Fatalf("Files = %q", files)
	}
	mustVerify(t, path, 50)
}

// TestRotationBigBatch: a batch larger than MaxBytes is written whole into
// a fresh file, and the next append rotates again.
func TestRotationBigBatch(t *testing.T) {
	size := recordSize(t)
	path := filepath.Join(t.TempDir(), "audit.jsonl")
	l, err := Open(path, Options{NoSync: true, MaxBytes: 2 * size, MaxFiles: 5})
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	if _, err := l.Append(call(0)); err != nil {
		t.Fatal(err)
	}
	if err := l.AppendAll([]Record{call(1), call(2), call(3), call(4)}); err != nil {
		t.Fatal(err)
	}
	if _, err := l.Append(call(5)); err != nil {
		t.Fatal(err)
	}
	files, _ := Files(path)
	if len(files) != 3 || len(lines(t, files[1])) != 4 {
		t.Fatalf("Files = %q; want the batch alone in the middle one", files)
	}
	mustVerifyLog(t, path, 6, "")
}

// TestVerifyLogFindsBreaks: VerifyLog names the file and line where the
// chain across rotated files breaks.
func TestVerifyLogFindsBreaks(t *testing.T) {
	size := recordSize(t)
	dir := t.TempDir()
	write := func(name string) string {
		path := filepath.Join(dir, name, "audit.jsonl")
		l, err := Open(path, Options{NoSync: true, MaxBytes: 3*size + size/2, MaxFiles: 10})
		if err != nil {
			t.Fatal(err)
		}
		defer l.Close()
		for i := range 12 { // four files of three
			if _, err := l.Append(call(i)); err != nil {
				t.Fatal(err)
			}
		}
		return path
	}
	for _, c := range []struct {
		name    string
		damage  func(path string)
		file    string
		line    int
		reason  string
		records int
	}{
		{"middle file deleted", func(path string) { os.Remove(path + ".2") }, ".1", 1,
			"prev mismatch: the first record does not follow the last record of " + filepath.Join(dir, "middle_file_deleted", "audit.jsonl.3"), 3},
		{"record edited", func(path string) {
			ls := lines(t, path+".2")
			ls[1] = strings.Replace(ls[1], `"tool":"t4"`, `"tool":"tX"`, 1)
			os.WriteFile(path+".2", []byte(strings.Join(ls, "")), 0o600)
		}, ".2", 2, "hash mismatch", 4},
		{"last record of a file deleted", func(path string) {
			ls := lines(t, path+".1")
			os.WriteFile(path+".1", []byte(strings.Join(ls[:2], "")), 0o600)
		}, "", 1, "prev mismatch: the first record does not follow the last record of", 8},
		{"files swapped", func(path string) {
			os.Rename(path+".1", path+".x")
			os.Rename(path+".2", path+".1")
			os.Rename(path+".x", path+".2")
		}, ".2", 1, "prev mismatch", 3},
	} {
		t.Run(c.name, func(t *testing.T) {
			path := write(strings.ReplaceAll(c.name, " ", "_"))
			mustVerifyLog(t, path, 12, "")
			c.damage(path)
			rep, err := VerifyLog(path)
			var ve *VerifyError
			if !errors.As(err, &ve) || ve.File != path+c.file || ve.Line != c.line || !strings.Contains(ve.Reason, c.reason) {
				t.Fatalf("VerifyLog = %+v, %v; want %s line %d: %s", rep, err, path+c.file, c.line, c.reason)
			}
			if rep.Records != c.records {
				t.Fatalf("VerifyLog counted %d records, want %d", rep.Records, c.records)
			}
			if !strings.HasPrefix(err.Error(), path+c.file+": line ") {
				t.Fatalf("the error does not name the file: %v", err)
			}
		})
	}
	if _, err := VerifyLog(filepath.Join(dir, "none", "audit.jsonl")); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("VerifyLog of no file: %v", err)
	}
}

// TestFiles: only PATH.n with a plain decimal n counts, oldest first; the
// log itself may be missing (a crash right after a rotation's rename).
func TestFiles(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "audit.jsonl")
	for _, name := range []string{"audit.jsonl.2", "audit.jsonl.10", "audit.jsonl.1", "audit.jsonl.01", "audit.jsonl.x",
		"audit.jsonl.1.bak", "audit.jsonl.-1", "audit.jsonl.", "other.jsonl.3"} {
		os.WriteFile(filepath.Join(dir, name), nil, 0o600)
	}
	files, err := Files(path)
	if want := []string{path + ".10", path + ".2", path + ".1"}; err != nil || !slices.Equal(files, want) {
		t.Fatalf("Files = %q, %v; want %q", files, err, want)
	}
	os.WriteFile(path, nil, 0o600)
	if files, _ := Files(path); len(files) != 4 || files[3] != path {
		t.Fatalf("Files = %q", files)
	}
}

// TestRotationConcurrentLogs: two Logs on one file stand for two processes
// (each its own open file, so the flock, not the mutex, keeps them apart);
// rotation happens under the lock and the other Log follows the path, so
// no record lands in a rotated file and the chain runs through every
// record in order.
func TestRotationConcurrentLogs(t *testing.T) {
	size := recordSize(t)
	path := filepath.Join(t.TempDir(), "audit.jsonl")
	opts := Options{NoSync: true, MaxBytes: 5 * size, MaxFiles: 1000}
	var logs []*Log
	for range 2 {
		l, err := Open(path, opts)
		if err != nil {
			t.Fatal(err)
		}
		defer l.Close()
		logs = append(logs, l)
	}
	var wg sync.WaitGroup
	for g := range 8 {
		wg.Go(func() {
			for i := range 25 {
				var err error
				if i%5 == 0 {
					err = logs[g%2].AppendAll([]Record{call(i), call(i + 100)})
				} else {
					_, err = logs[g%2].Append(call(i))
				}
				if err != nil {
					t.Error(err)
					return
				}
			}
		})
	}
	wg.Wait()
	rep := mustVerifyLog(t, path, 8*30, "")
	if len(rep.Files) < 40 {
		t.Fatalf("only %d files: the test rotated too little to prove anything", len(rep.Files))
	}
	for _, name := range rep.Files {
		if fi, _ := os.Stat(name); fi.Size() > opts.MaxBytes {
			t.Errorf("%s: %d bytes, more than %d", name, fi.Size(), opts.MaxBytes)
		}
	}
}

// TestRotationConcurrentProcesses: the same with real processes.
func TestRotationConcurrentProcesses(t *testing.T) {
	size := recordSize(t)
	path := filepath.Join(t.TempDir(), "audit.jsonl")
	opts := Options{NoSync: true, MaxBytes: 8 * size, MaxFiles: 1000}
	l, err := Open(path, opts)
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	const procs, each = 3, 100
	cmds := startAppenders(t, path, procs, each, opts.MaxBytes)
	for i := range each {
		if _, err := l.Append(call(i)); err != nil {
			t.Fatal(err)
		}
	}
	for _, cmd := range cmds {
		if err := cmd.Wait(); err != nil {
			t.Fatalf("appender: %v", err)
		}
	}
	rep := mustVerifyLog(t, path, (procs+1)*each, "")
	t.Logf("%d records in %d files", rep.Records, len(rep.Files))
}

func TestDefaultPath(t *testing.T) {
	t.Setenv("XDG_STATE_HOME", "/var/state")
	if p, err := DefaultPath(); err != nil || p != "/var/state/troupe/audit.jsonl" {
		t.Fatalf("DefaultPath = %q, %v", p, err)
	}
	t.Setenv("XDG_STATE_HOME", "relative")
	t.Setenv("HOME", "/home/u")
	if p, err := DefaultPath(); err != nil || p != "/home/u/.local/state/troupe/audit.jsonl" {
		t.Fatalf("DefaultPath = %q, %v", p, err)
	}
}

func BenchmarkAppend(b *testing.B) {
	for _, o := range []struct {
		name string
		opts Options
	}{{"fsync", Options{}}, {"nosync", Options{NoSync: true}}} {
		b.Run(o.name, func(b *testing.B) {
			dir := os.Getenv("AUDIT_BENCH_DIR") // a real disk, if TMPDIR is not
			if dir == "" {
				dir = b.TempDir()
			} else {
				var err error
				if dir, err = os.MkdirTemp(dir, "bench"); err != nil {
					b.Fatal(err)
				}
				defer os.RemoveAll(dir)
			}
			l, err := Open(filepath.Join(dir, "audit.jsonl"), o.opts)
			if err != nil {
				b.Fatal(err)
			}
			defer l.Close()
			r := call(1)
			for b.Loop() {
				if _, err := l.Append(r); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
	// A busy server's auditor writes its waiting records as one batch.
	for _, o := range []struct {
		name string
		opts Options
	}{{"fsync-batch32", Options{}}, {"nosync-batch32", Options{NoSync: true}}} {
		b.Run(o.name, func(b *testing.B) {
			l, err := Open(filepath.Join(b.TempDir(), "audit.jsonl"), o.opts)
			if err != nil {
				b.Fatal(err)
			}
			defer l.Close()
			batch := make([]Record, 32)
			for i := range batch {
				batch[i] = call(i)
			}
			b.ReportAllocs()
			for b.Loop() {
				if err := l.AppendAll(batch); err != nil {
					b.Fatal(err)
				}
			}
			b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*len(batch)), "ns/record")
		})
	}
}
