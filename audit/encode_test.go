package audit

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"reflect"
	"strings"
	"testing"
	"time"
)

// jsonLine is a record's line as the first writer made it: encoding/json's
// encoding of the record with Hash "", the hash put between its last
// quotes.
func jsonLine(r Record) ([]byte, error) {
	r.Hash = ""
	canon, err := json.Marshal(r)
	if err != nil {
		return nil, err
	}
	sum := sha256.Sum256(canon)
	return append(append(canon[:len(canon)-2:len(canon)-2], hex.EncodeToString(sum[:])...), "\"}\n"...), nil
}

// FuzzAppendLine checks the hand-written encoder against encoding/json:
// the same bytes, so the same hash, and the same record read back.
func FuzzAppendLine(f *testing.F) {
	for _, r := range goldenRecords() {
		exit, hasExit := 0, r.ExitStatus != nil
		if hasExit {
			exit = *r.ExitStatus
		}
		_, off := r.Time.Zone()
		f.Add(r.Event, r.Session, r.Tool, r.Cwd, strings.Join(r.SessionEnv, "\n"), r.CorrelationID,
			r.Time.UnixNano(), r.Started.Unix(), off, r.TimeoutMs, r.StdoutBytes, exit, hasExit)
	}
	f.Add("call", "s", "\u2028<>&\"\\\x00\x7f\xff", "", "", "c", int64(-1), int64(-62135596800-1), 59, int64(0), int64(-1), -1, true)
	f.Add("call", "s", "t", "", "", "c", int64(0), int64(253402300800), 24*3600-60, int64(1), int64(0), 0, false)
	f.Fuzz(func(t *testing.T, event, session, tool, cwd, env, cid string, at, started int64, offset int, timeout, out int64, exit int, hasExit bool) {
		zone := time.FixedZone("Z", offset%(30*3600))
		r := Record{Time: time.Unix(0, at).In(zone), Event: event, Session: session, Tool: tool, ArgsHash: cid + tool,
			Cwd: cwd, SessionCwd: cwd + session, Sandbox: event, TimeoutMs: timeout, Approval: session + event,
			Started: time.Unix(started, at%1e9).In(zone), Stopped: time.Unix(started, 0).UTC(), Outcome: tool,
			StdoutBytes: out, StderrBytes: timeout, Sampling: out % 3, CorrelationID: cid, Hash: "ignored"}
		if cwd != "" { // a chained record; Prev is always a hash or ""
			sum := sha256.Sum256([]byte(cwd))
			r.Prev = hex.EncodeToString(sum[:])
		}
		if env != "" {
			r.SessionEnv = strings.Split(env, "\n")
		}
		if hasExit {
			r.ExitStatus = &exit
		}
		if exit%2 != 0 { // a pin record, some members empty
			r.Pin = &Pin{Server: session, Kind: event, Version: cid, Change: tool, Mode: cwd, By: env}
		}
		want, wantErr := jsonLine(r)
		if len(want) > maxLine {
			want, wantErr = nil, errLong
		}
		got, err := appendLine([]byte("x"), &r, []byte(r.Prev))
		if (err != nil) != (wantErr != nil) {
			t.Fatalf("appendLine: error %v, encoding/json: %v", err, wantErr)
		}
		if err != nil {
			if string(got) != "x" {
				t.Fatalf("a failed appendLine left %q", got)
			}
			return
		}
		if !bytes.Equal(got[1:], want) {
			t.Fatalf("appendLine:\n%s\nencoding/json:\n%s", got[1:], want)
		}
	})
}

var errLong = bytes.ErrTooLarge

// TestEncoderKnowsEveryField fails when Record gains a field that
// appendLine does not write yet.
func TestEncoderKnowsEveryField(t *testing.T) {
	const written = "time event session identity,omitempty tool args_hash cwd,omitempty session_cwd,omitempty session_env,omitempty " +
		"sandbox,omitempty timeout_ms,omitempty approval started stopped outcome exit_status,omitempty " +
		"stdout_bytes stderr_bytes sampling,omitempty pin,omitempty correlation_id prev hash"
	var tags []string
	for f := range reflect.TypeFor[Record]().Fields() {
		tags = append(tags, f.Tag.Get("json"))
	}
	if got := strings.Join(tags, " "); got != written {
		t.Fatalf("Record's fields are\n%s\nbut appendLine writes\n%s\nwrite the new field in appendLine, in its place", got, written)
	}
}
