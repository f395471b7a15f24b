// Package redact keeps secret values out of what troupe writes: server
// logs, audit records, approval prompts and streamed tool output.
//
// A secret is known by its value, not by where it appears: the values of
// "${NAME}" references in the configuration (config.Config.Secrets) and of
// environment entries whose names look like credentials (IsSecretKey,
// EnvValues). A Redactor holds such values and replaces every occurrence
// with Mask:
//
//	r := redact.New(cfg.Secrets...).With(redact.EnvValues(toolEnv)...)
//	msg = r.Replace(msg)              // one string
//	w := r.Writer(out); defer w.Close() // a stream, secrets split across writes included
//
// The server's current Redactor lives in a Live, swapped on config reload;
// Handler wraps a slog.Handler so every log record is masked with it:
//
//	var live redact.Live
//	live.Store(redact.New(cfg.Secrets...))
//	log := slog.New(redact.Handler(h, &live))
//
// Rules worth knowing:
//   - Values shorter than MinLen (4) bytes are ignored: masking "a" or "on"
//     would mangle every line while hiding nothing worth hiding.
//   - Every byte of every occurrence of every value is masked. Where
//     occurrences overlap ("abcdef" and "defghi" in "abcdefghi") they are
//     masked as one run, so no part of either leaks; at one position the
//     longest value wins.
//   - A Redactor is immutable and safe for concurrent use; nil and the
//     empty Redactor mask nothing and Replace returns its input without
//     allocating, as it does whenever nothing matches.
//   - Redaction is by exact bytes. A secret that reaches the output
//     transformed (base64, URL-escaped, JSON-escaped, split by a line
//     wrapper) is not recognised.
package redact

import (
	"cmp"
	"slices"
	"strings"
)

// Mask replaces each masked run of bytes. It is the marker command tools
// already use for the model's view of their output, so the model, the logs
// and the audit log read alike.
const Mask = "[redacted]"

// MinLen is the shortest value a Redactor masks, in bytes.
const MinLen = 4

// IsSecretKey reports whether an environment variable, config key or header
// named name holds a secret, so its value should be masked. Case does not
// matter and "-" counts as "_" (so the header X-Api-Key is a secret).
//
// A name is a secret when it
//   - ends in _TOKEN, _KEY, _SECRET, _APIKEY or _AUTHORIZATION (GITHUB_TOKEN,
//     AWS_SECRET_ACCESS_KEY, CLIENT_SECRET, Proxy-Authorization);
//   - contains PASSWORD, PASSWD or PASSPHRASE (DB_PASSWORD, PGPASSWORD);
//   - is exactly TOKEN, SECRET, APIKEY or AUTHORIZATION.
//
// The bare name KEY is not taken for a secret, nor are names that merely
// contain KEY or TOKEN as part of a word (KEYBOARD, MONKEY, TOKENIZER,
// GITHUB_TOKEN_FILE, which holds a path): KEY alone is as often a map or
// sort key as a credential, and masking a harmless value everywhere it
// occurs hides more than it protects.
func IsSecretKey(name string) bool {
	n := strings.ReplaceAll(strings.ToUpper(name), "-", "_")
	switch n {
	case "TOKEN", "SECRET", "APIKEY", "AUTHORIZATION":
		return true
	}
	for _, suffix := range []string{"_TOKEN", "_KEY", "_SECRET", "_APIKEY", "_AUTHORIZATION"} {
		if strings.HasSuffix(n, suffix) {
			return true
		}
	}
	for _, part := range []string{"PASSWORD", "PASSWD", "PASSPHRASE"} {
		if strings.Contains(n, part) {
			return true
		}
	}
	return false
}

// EnvValues returns the non-empty values of env's entries whose keys are
// secrets by IsSecretKey, sorted and without duplicates, to build a
// Redactor for a tool's environment.
func EnvValues(env map[string]string) []string {
	var out []string
	for k, v := range env {
		if v != "" && IsSecretKey(k) {
			out = append(out, v)
		}
	}
	slices.Sort(out)
	return slices.Compact(out)
}

// Redactor masks a fixed set of secret values. Build one with New or With;
// the zero value and nil mask nothing. It is immutable, so one Redactor may
// be used by any number of goroutines.
type Redactor struct {
	// values are the distinct values, longest first (ties in byte order),
	// so the first that matches at a position is the longest.
	values []string
	// byFirst[c] are the values starting with byte c, in the same order:
	// the scan looks at each position's candidates only.
	byFirst [256][]string
	maxLen  int
}

// New returns a Redactor masking values. Values shorter than MinLen bytes
// are dropped, duplicates count once. With no values it returns a Redactor
// that masks nothing.
func New(values ...string) *Redactor {
	return build(values)
}

// With returns a new Redactor masking r's values and values; r is not
// changed. r may be nil.
func (r *Redactor) With(values ...string) *Redactor {
	if r == nil {
		return build(values)
	}
	return build(append(slices.Clone(r.values), values...))
}

func build(values []string) *Redactor {
	r := &Redactor{}
	for _, v := range values {
		if len(v) >= MinLen {
			r.values = append(r.values, v)
		}
	}
	slices.SortFunc(r.values, func(a, b string) int {
		if c := cmp.Compare(len(b), len(a)); c != 0 {
			return c
		}
		return strings.Compare(a, b)
	})
	r.values = slices.Compact(r.values)
	for _, v := range r.values {
		r.byFirst[v[0]] = append(r.byFirst[v[0]], v)
		r.maxLen = max(r.maxLen, len(v))
	}
	return r
}

// Len is the number of distinct values r masks (those of at least MinLen
// bytes); 0 for nil.
func (r *Redactor) Len() int {
	if r == nil {
		return 0
	}
	return len(r.values)
}

// Replace returns s with every occurrence of r's values replaced by Mask.
// When nothing matches (or r is nil or empty) it returns s itself without
// allocating.
func (r *Redactor) Replace(s string) string {
	if r == nil || len(r.values) == 0 {
		return s
	}
	i := r.index(s)
	if i < 0 {
		return s
	}
	dst := make([]byte, 0, len(s))
	dst = append(dst, s[:i]...)
	dst, _, _ = redactInto(r, dst, s[i:], 0, true)
	return string(dst)
}

// index returns the position of the first occurrence of any of r's values
// in s, or -1.
func (r *Redactor) index(s string) int {
	for i := 0; i+MinLen <= len(s); i++ {
		for _, v := range r.byFirst[s[i]] {
			if strings.HasPrefix(s[i:], v) {
				return i
			}
		}
	}
	return -1
}

// redactInto appends data to dst with r's values masked, and is shared by
// Replace (final, all of data at once) and the streaming Writer.
//
// covered is how many leading bytes of data lie inside a masked run whose
// Mask has already been written (a run that began in an earlier call).
// Unless final, redactInto stops at the first position where a value might
// begin but data ends before it could be told (data[i:] is a proper prefix
// of a value): used is how many bytes of data it has dealt with, and
// coveredAfter how many bytes from data[used:] on are already masked. With
// final, used is len(data).
func redactInto[T string | []byte](r *Redactor, dst []byte, data T, covered int, final bool) (out []byte, used, coveredAfter int) {
	lit := covered // start of the bytes not yet copied to dst (masked bytes never are)
	i := 0
scan:
	for ; i < len(data); i++ {
		n := 0 // length of the longest value matching at i
		rest := len(data) - i
		for _, v := range r.byFirst[data[i]] {
			if len(v) > rest {
				if !final && string(data[i:]) == v[:rest] {
					break scan // undecided until more data arrives
				}
				continue
			}
			if string(data[i:i+len(v)]) == v {
				n = len(v)
				break // values are longest first
			}
		}
		switch {
		case i < covered:
			// Inside a run already masked: an overlapping value extends it.
			covered = max(covered, i+n)
		case n > 0:
			dst = append(dst, data[lit:i]...)
			dst = append(dst, Mask...)
			covered = i + n
		default:
			continue
		}
		lit = covered
	}
	if lit < i {
		dst = append(dst, data[lit:i]...)
	}
	return dst, i, max(covered-i, 0)
}
