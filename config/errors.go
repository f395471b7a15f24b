package config

import (
	"encoding/json"
	"errors"
	"fmt"
	"regexp"
	"slices"
	"strconv"
	"strings"
)

// Error is one problem in the configuration, said in troupe's words: where
// it is (the layer, and for a file the line), which key (its full dotted
// name), the value that is wrong, what is wrong with it, and the nearest
// key troupe knows. It is exported so that commands and tests can read the
// parts; its text is what `troupe config check` and `serve` print.
type Error struct {
	// Layer is where the setting came from: "config file PATH",
	// "environment TROUPE_…", "-c key=value", or "config" when no single
	// layer set it.
	Layer string
	// Line and Column locate the problem in a file layer; 0 = unknown.
	Line, Column int
	// Key is the full dotted key ("limits.call_timeout", `mcp."git.status"`),
	// "" for problems that are not about one key (TOML syntax).
	Key string
	// Value is the offending value as written (TOML), "" when there is none
	// to show; secrets are masked.
	Value string
	// Problem says what is wrong.
	Problem string
	// Hint is advice such as "did you mean limits.call_timeout?", or "".
	Hint string
}

// Error renders "LAYER[:LINE[:COL]]: KEY[ = VALUE]: PROBLEM[ (HINT)]".
func (e *Error) Error() string {
	var b strings.Builder
	b.WriteString(e.Layer)
	if e.Line > 0 {
		fmt.Fprintf(&b, ":%d", e.Line)
		if e.Column > 0 {
			fmt.Fprintf(&b, ":%d", e.Column)
		}
	}
	b.WriteString(": ")
	if e.Key != "" {
		b.WriteString(e.Key)
		if e.Value != "" {
			b.WriteString(" = ")
			b.WriteString(e.Value)
		}
		b.WriteString(": ")
	}
	b.WriteString(e.Problem)
	if e.Hint != "" {
		b.WriteString(" (")
		b.WriteString(e.Hint)
		b.WriteString(")")
	}
	return b.String()
}

// Errors is every problem found in the configuration at once, so a user
// fixes them in one pass rather than one per run.
type Errors []*Error

// Error renders one problem as its line; several as a count and one
// indented line each.
func (es Errors) Error() string {
	if len(es) == 1 {
		return es[0].Error()
	}
	lines := make([]string, 0, len(es)+1)
	lines = append(lines, fmt.Sprintf("%d problems in the configuration:", len(es)))
	for _, e := range es {
		lines = append(lines, "  "+e.Error())
	}
	return strings.Join(lines, "\n")
}

// ordered sorts the problems by layer (in the order the layers first
// appear) and, within a file, by line, so a file reads top to bottom.
func (es Errors) ordered() Errors {
	rank := map[string]int{}
	for _, e := range es {
		if _, ok := rank[e.Layer]; !ok {
			rank[e.Layer] = len(rank)
		}
	}
	slices.SortStableFunc(es, func(a, b *Error) int {
		if d := rank[a.Layer] - rank[b.Layer]; d != 0 {
			return d
		}
		return a.Line - b.Line
	})
	return es
}

// Unwrap lets errors.As find each *Error.
func (es Errors) Unwrap() []error {
	out := make([]error, len(es))
	for i, e := range es {
		out[i] = e
	}
	return out
}

// bareKey is what TOML allows unquoted in a key.
var bareKey = regexp.MustCompile(`^[A-Za-z0-9_-]+$`)

// entryPart is the path part of the n-th entry (from 1, as a person
// counts the [[header]] blocks) of an array of tables: key paths go
// through it as through a table, and dotted shows auth.tokens[2].name.
func entryPart(n int) string { return "[" + strconv.Itoa(n) + "]" }

// entryIndex reads an entryPart back as an index into the array (from 0).
func entryIndex(part string) (int, bool) {
	digits, ok := strings.CutPrefix(part, "[")
	if digits, ok = strings.CutSuffix(digits, "]"); !ok || digits == "" {
		return 0, false
	}
	n, err := strconv.Atoi(digits)
	if err != nil || n < 1 || strconv.Itoa(n) != digits {
		return 0, false
	}
	return n - 1, true
}

// dotted renders a key path the way it is written in TOML: mcp."git.status";
// an entry of an array of tables is shown as auth.tokens[2].name.
func dotted(path []string) string {
	var b strings.Builder
	for i, p := range path {
		switch _, entry := entryIndex(p); {
		case entry:
			b.WriteString(p)
			continue
		case i > 0:
			b.WriteByte('.')
		}
		if bareKey.MatchString(p) {
			b.WriteString(p)
		} else {
			q, _ := json.Marshal(p) // a JSON string is a TOML basic string
			b.Write(q)
		}
	}
	return b.String()
}

// envName is the environment variable that sets the key at path.
func envName(path []string) string {
	return EnvPrefix + strings.ToUpper(strings.Join(path, "__"))
}

// maxValueLen bounds a value shown in an error.
const maxValueLen = 80

// showValue renders a value as TOML for an error message: strings quoted,
// tables as {…}, secrets masked, long values shortened.
func showValue(path []string, v any) string {
	var s string
	switch t := v.(type) {
	case nil:
		return ""
	case string:
		s = strconv.Quote(maskValue(path, t))
	case []any:
		items := make([]string, len(t))
		for i, it := range t {
			items[i] = showValue(path, it)
		}
		s = "[" + strings.Join(items, ", ") + "]"
	case map[string]any:
		return "{…}"
	default:
		if IsSecretKey(path) {
			return "<redacted>"
		}
		s = fmt.Sprint(t)
	}
	if r := []rune(s); len(r) > maxValueLen {
		s = string(r[:maxValueLen-1]) + "…"
	}
	return s
}

// describe names a decoded TOML value's type for "want X, got Y".
func describe(v any) string {
	switch t := v.(type) {
	case string:
		return "a string"
	case bool:
		return "a boolean"
	case int64:
		return "an integer"
	case float64:
		return "a float"
	case []any:
		return "an array"
	case map[string]any:
		return "a table"
	case nil:
		return "nothing"
	default:
		return fmt.Sprintf("a %T", t)
	}
}

// lookup returns the value at path in a layer's tree; an entryPart picks
// an entry of an array of tables.
func lookup(m map[string]any, path []string) (any, bool) {
	var v any = m
	for _, p := range path {
		if items, ok := v.([]any); ok {
			i, entry := entryIndex(p)
			if !entry || i >= len(items) {
				return nil, false
			}
			v = items[i]
			continue
		}
		t, ok := v.(map[string]any)
		if !ok {
			return nil, false
		}
		if v, ok = t[p]; !ok {
			return nil, false
		}
	}
	return v, true
}

// locate turns an issue in one layer into an *Error: the layer's name (for
// the environment, the variables involved), the line in a file, the value,
// and the suggestion spelled as that layer spells keys.
func (s *source) locate(path []string, value any, problem string, suggest []string, note string) *Error {
	e := &Error{Layer: s.name, Key: dotted(path), Value: showValue(path, value), Problem: problem, Hint: note}
	var vars [][]string // env paths under this key, else under its nearest table
	full := false
	if s.vars != nil {
		for n := len(path); n > 0 && len(vars) == 0; n-- {
			for _, vp := range s.varPaths() {
				if len(vp) >= n && slices.Equal(vp[:n], path[:n]) {
					vars = append(vars, vp)
				}
			}
			full = n == len(path)
		}
		names := make([]string, len(vars))
		for i, vp := range vars {
			names[i] = s.vars[strings.Join(vp, delim)]
		}
		if len(names) > 0 {
			e.Layer = "environment " + strings.Join(names, ", ")
		}
	}
	if s.lines != nil {
		for n := len(path); n > 0; n-- {
			if pos, ok := s.lines[strings.Join(path[:n], delim)]; ok {
				e.Line = pos.line
				break
			}
		}
	}
	if suggest != nil {
		want := dotted(suggest)
		if len(vars) > 0 && full {
			// Keep what the variable says below the misspelt part.
			full := append(slices.Clone(suggest), vars[0][len(path):]...)
			want = envName(full)
		}
		e.Hint = "did you mean " + want + "?"
		if note != "" {
			e.Hint += "; " + note
		}
	}
	return e
}

// varPaths lists the key paths the environment layer set, sorted.
func (s *source) varPaths() [][]string {
	keys := make([]string, 0, len(s.vars))
	for k := range s.vars {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	out := make([][]string, len(keys))
	for i, k := range keys {
		out[i] = strings.Split(k, delim)
	}
	return out
}

// locateKeyError says which layer set the key a validation error is about
// (the last one that set it wins, as in the merge), with the line and the
// value as that layer wrote them.
func locateKeyError(sources []source, err error) *Error {
	var ke *keyError
	if !errors.As(err, &ke) {
		return &Error{Layer: "config", Problem: err.Error()}
	}
	problem, keyed := splitKey(ke.key, ke.msg)
	if ke.because != nil && !slices.ContainsFunc(sources, func(s source) bool { _, ok := lookup(s.data, ke.key); return ok }) {
		for i := len(sources) - 1; i >= 0; i-- {
			if _, ok := lookup(sources[i].data, ke.because); ok {
				e := sources[i].locate(ke.because, nil, problem, nil, "")
				e.Key = dotted(ke.key)
				if !keyed {
					e.Key = ""
				}
				return e
			}
		}
	}
	// The key itself, else the table around it (a required key that no
	// layer set is the fault of the layer that made the table).
	for n := len(ke.key); n > 0; n-- {
		for i := len(sources) - 1; i >= 0; i-- {
			v, ok := lookup(sources[i].data, ke.key[:n])
			if !ok {
				continue
			}
			if _, table := v.(map[string]any); table || n < len(ke.key) || !keyed ||
				strings.Contains(problem, "got ") || strings.Contains(problem, showValue(ke.key, v)) {
				v = nil // no value, or the message shows it already
			}
			e := sources[i].locate(ke.key, v, problem, nil, "")
			if !keyed {
				e.Key = ""
			}
			return e
		}
	}
	e := &Error{Layer: "config", Key: dotted(ke.key), Problem: problem}
	if !keyed {
		e.Key = ""
	}
	return e
}

// splitKey takes the key off the front of a validation message
// ("limits.page_size must be at least 1", `mcp."t".command is required`),
// so the message can be shown after the key in the usual form; keyed is
// false when the message does not start with its key.
func splitKey(path []string, msg string) (problem string, keyed bool) {
	forms := []string{dotted(path)}
	if len(path) >= 2 { // validate.go's `mcp.%q.rest` spelling
		forms = append(forms, path[0]+"."+strconv.Quote(path[1])+strings.Join(append([]string{""}, path[2:]...), "."))
	}
	for _, f := range forms {
		rest, ok := strings.CutPrefix(msg, f)
		if ok && (rest == "" || rest[0] == ' ' || rest[0] == ':') {
			return strings.TrimLeft(rest, ": "), true
		}
	}
	return msg, false
}
