package audit

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"strconv"
	"time"

	"troupe/internal/jsonvalue"
)

// appendLine appends r's line to dst: its canonical form with the hash
// filled in, and a newline. The line's prev is prev (a hex hash or
// empty), not r.Prev: a batch chains each record to the bytes of the line
// before it, with no string made of them. r.Hash is ignored (the
// canonical form has it empty). The canonical form is, byte for byte,
// what encoding/json wrote for Record when the log was first written, so
// that every log written since still verifies and reads the same
// (TestGoldenLog, FuzzAppendLine); it is written by hand because
// encoding/json's reflection was most of a record's cost. A field added
// to Record must be added here, in its place (TestEncoderKnowsEveryField).
// On failure dst comes back as it was.
func appendLine(dst []byte, r *Record, prev []byte) ([]byte, error) {
	start := len(dst)
	b := append(dst, `{"time":`...)
	var err error
	if b, err = appendTime(b, r.Time); err != nil {
		return dst, fmt.Errorf("time: %w", err)
	}
	b = appendStringField(b, `,"event":`, r.Event)
	b = appendStringField(b, `,"session":`, r.Session)
	if r.Identity != "" {
		b = appendStringField(b, `,"identity":`, r.Identity)
	}
	b = appendStringField(b, `,"tool":`, r.Tool)
	b = appendStringField(b, `,"args_hash":`, r.ArgsHash)
	if r.Cwd != "" {
		b = appendStringField(b, `,"cwd":`, r.Cwd)
	}
	if r.SessionCwd != "" {
		b = appendStringField(b, `,"session_cwd":`, r.SessionCwd)
	}
	if len(r.SessionEnv) > 0 {
		b = append(b, `,"session_env":`...)
		b = jsonvalue.AppendStrings(b, r.SessionEnv)
	}
	if r.Sandbox != "" {
		b = appendStringField(b, `,"sandbox":`, r.Sandbox)
	}
	if r.TimeoutMs != 0 {
		b = append(b, `,"timeout_ms":`...)
		b = strconv.AppendInt(b, r.TimeoutMs, 10)
	}
	b = appendStringField(b, `,"approval":`, r.Approval)
	b = append(b, `,"started":`...)
	if b, err = appendTime(b, r.Started); err != nil {
		return dst, fmt.Errorf("started: %w", err)
	}
	b = append(b, `,"stopped":`...)
	if b, err = appendTime(b, r.Stopped); err != nil {
		return dst, fmt.Errorf("stopped: %w", err)
	}
	b = appendStringField(b, `,"outcome":`, r.Outcome)
	if r.ExitStatus != nil {
		b = append(b, `,"exit_status":`...)
		b = strconv.AppendInt(b, int64(*r.ExitStatus), 10)
	}
	b = append(b, `,"stdout_bytes":`...)
	b = strconv.AppendInt(b, r.StdoutBytes, 10)
	b = append(b, `,"stderr_bytes":`...)
	b = strconv.AppendInt(b, r.StderrBytes, 10)
	if r.Sampling != 0 {
		b = append(b, `,"sampling":`...)
		b = strconv.AppendInt(b, r.Sampling, 10)
	}
	if p := r.Pin; p != nil {
		b = appendStringField(b, `,"pin":{"server":`, p.Server)
		b = appendStringField(b, `,"kind":`, p.Kind)
		b = appendStringField(b, `,"version":`, p.Version)
		if p.Change != "" {
			b = appendStringField(b, `,"change":`, p.Change)
		}
		if p.Mode != "" {
			b = appendStringField(b, `,"mode":`, p.Mode)
		}
		if p.By != "" {
			b = appendStringField(b, `,"by":`, p.By)
		}
		b = append(b, '}')
	}
	b = appendStringField(b, `,"correlation_id":`, r.CorrelationID)
	b = append(b, `,"prev":"`...)
	b = append(b, prev...) // hex digits, or nothing: nothing to escape
	b = append(b, '"')
	b = append(b, emptyHashEnd...)
	// The hash covers the canonical form; then the digits go between the
	// hash's quotes.
	sum := sha256.Sum256(b[start:])
	b = b[:len(b)-2]
	b = hex.AppendEncode(b, sum[:])
	b = append(b, "\"}\n"...)
	if n := len(b) - start; n > maxLine {
		return dst, fmt.Errorf("record of %d bytes is larger than %d", n, maxLine)
	}
	return b, nil
}

// appendStringField appends a member key (with its comma and colon) and
// a string value.
func appendStringField(b []byte, key, s string) []byte {
	return jsonvalue.AppendString(append(b, key...), s)
}

// appendTime appends t as encoding/json does (time.Time.MarshalJSON):
// quoted RFC 3339 with nanoseconds, refusing what RFC 3339 cannot say.
func appendTime(b []byte, t time.Time) ([]byte, error) {
	n := len(b)
	b = append(b, '"')
	b = t.AppendFormat(b, time.RFC3339Nano)
	switch s := b[n+1:]; {
	case len(s) < 5 || s[4] != '-':
		return b[:n], errors.New("year outside of range [0,9999]")
	case s[len(s)-1] != 'Z':
		if c := s[len(s)-6]; c >= '0' && c <= '9' || (s[len(s)-5]-'0')*10+s[len(s)-4]-'0' >= 24 {
			return b[:n], errors.New("timezone hour outside of range [0,23]")
		}
	}
	return append(b, '"'), nil
}
