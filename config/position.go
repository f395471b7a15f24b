package config

import (
	"errors"
	"fmt"
	"os"
	"slices"
	"strings"

	gotoml "github.com/pelletier/go-toml/v2"
	"github.com/pelletier/go-toml/v2/unstable"
)

// pos is where a key is first written in a file.
type pos struct{ line, col int }

// defKind is how a key came to exist in a TOML document, which decides
// whether it may be written again.
type defKind int

const (
	implicitTable defKind = iota // a prefix of a [header]: may get its own header later
	headerTable                  // [header]: once
	dottedTable                  // a prefix of a dotted key: no header may open it
	inlineValue                  // a value, or a key inside an inline table: closed
	arrayTable                   // [[header]]: repeats
)

// fileIndex maps every key of a TOML document to its line, and finds the
// keys and tables written twice, naming them in full (go-toml says only
// "table greet already exists", without where or under what).
type fileIndex struct {
	p     *unstable.Parser
	lines map[string]pos
	kinds map[string]defKind
	// entries counts the entries of each array of tables so far (by its
	// delim-joined path, entries of enclosing arrays included): each
	// [[header]] opens the next entry, a table of its own whose keys are
	// recorded under the header's path and "[N]" (entryPart).
	entries map[string]int
}

// readFile parses a config file. Syntax errors say line and column; keys
// and tables written twice say their full key and both lines.
func readFile(path string) (*source, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, &Error{Layer: "config file " + path, Problem: err.Error()}
	}
	layer := "config file " + path
	var data map[string]any
	uerr := gotoml.Unmarshal(b, &data)
	var de *gotoml.DecodeError
	if errors.As(uerr, &de) {
		row, col := de.Position()
		return nil, &Error{Layer: layer, Line: row, Column: col,
			Problem: "TOML syntax error: " + strings.TrimPrefix(de.Error(), "toml: ")}
	}
	idx := &fileIndex{p: &unstable.Parser{}, lines: map[string]pos{}, kinds: map[string]defKind{}, entries: map[string]int{}}
	if ierr := idx.build(b); ierr != nil {
		ierr.Layer = layer
		return nil, ierr
	}
	if uerr != nil {
		return nil, &Error{Layer: layer, Problem: strings.TrimPrefix(uerr.Error(), "toml: ")}
	}
	return &source{name: layer, data: data, lines: idx.lines}, nil
}

func (x *fileIndex) build(b []byte) *Error {
	x.p.Reset(b)
	var cur []string
	for x.p.NextExpression() {
		n := x.p.Expression()
		switch n.Kind {
		case unstable.Table, unstable.ArrayTable:
			written, at := x.key(n.Key())
			keys := x.inEntries(written)
			kind := headerTable
			if n.Kind == unstable.ArrayTable {
				kind = arrayTable
			}
			if err := x.define(keys, at, kind); err != nil {
				return err
			}
			if kind == arrayTable {
				// The next entry: a table of its own, at the header's line.
				id := strings.Join(keys, delim)
				x.entries[id]++
				keys = append(keys, entryPart(x.entries[id]))
				if err := x.define(keys, at, headerTable); err != nil {
					return err
				}
			}
			cur = keys
		case unstable.KeyValue:
			if err := x.keyValue(cur, n); err != nil {
				return err
			}
		}
	}
	return nil // syntax errors were reported by Unmarshal already
}

// inEntries puts, after each part of a header that names an array of
// tables, the entry it is in: [auth.tokens.rate] after [[auth.tokens]] is
// the rate table of the last entry so far.
func (x *fileIndex) inEntries(keys []string) []string {
	out := make([]string, 0, len(keys)+1)
	for i, k := range keys {
		out = append(out, k)
		id := strings.Join(out, delim)
		if i < len(keys)-1 && x.kinds[id] == arrayTable {
			out = append(out, entryPart(x.entries[id]))
		}
	}
	return out
}

// key reads a (dotted) key and where it starts.
func (x *fileIndex) key(it unstable.Iterator) ([]string, pos) {
	var keys []string
	var at pos
	for it.Next() {
		k := it.Node()
		if len(keys) == 0 {
			s := x.p.Shape(k.Raw)
			at = pos{s.Start.Line, s.Start.Column}
		}
		keys = append(keys, string(k.Data))
	}
	return keys, at
}

func (x *fileIndex) keyValue(table []string, n *unstable.Node) *Error {
	rel, at := x.key(n.Key())
	full := append(slices.Clone(table), rel...)
	for i := len(table) + 1; i < len(full); i++ {
		if err := x.prefix(full[:i], at, dottedTable); err != nil {
			return err
		}
	}
	id := strings.Join(full, delim)
	if prev, ok := x.lines[id]; ok {
		what := "key"
		if x.kinds[id] != inlineValue {
			what = "table"
		}
		return &Error{Line: at.line, Key: dotted(full),
			Problem: fmt.Sprintf("set twice: it is already a %s at line %d", what, prev.line)}
	}
	x.lines[id], x.kinds[id] = at, inlineValue
	if v := n.Value(); v.Kind == unstable.InlineTable {
		for it := v.Children(); it.Next(); {
			if c := it.Node(); c.Kind == unstable.KeyValue {
				if err := x.keyValue(full, c); err != nil {
					return err
				}
			}
		}
	}
	return nil
}

// define records a [header] or [[header]].
func (x *fileIndex) define(keys []string, at pos, kind defKind) *Error {
	for i := 1; i < len(keys); i++ {
		if err := x.prefix(keys[:i], at, implicitTable); err != nil {
			return err
		}
	}
	id := strings.Join(keys, delim)
	prev, seen := x.lines[id]
	switch {
	case !seen:
	case kind == arrayTable && x.kinds[id] == arrayTable:
		return nil
	case x.kinds[id] == implicitTable && kind == headerTable:
	case x.kinds[id] == inlineValue:
		return &Error{Line: at.line, Key: dotted(keys),
			Problem: fmt.Sprintf("table defined twice: line %d already set it as a value", prev.line)}
	case x.kinds[id] == dottedTable:
		return &Error{Line: at.line, Key: dotted(keys),
			Problem: fmt.Sprintf("table defined twice: dotted keys at line %d already made it", prev.line)}
	default:
		return &Error{Line: at.line, Key: dotted(keys),
			Problem: fmt.Sprintf("table defined twice (first at line %d); merge the two into one [%s]", prev.line, dotted(keys))}
	}
	x.lines[id], x.kinds[id] = at, kind
	return nil
}

// prefix records a table that a longer key implies.
func (x *fileIndex) prefix(keys []string, at pos, kind defKind) *Error {
	id := strings.Join(keys, delim)
	k, seen := x.kinds[id]
	if !seen {
		x.lines[id], x.kinds[id] = at, kind
		return nil
	}
	if k == inlineValue {
		return &Error{Line: at.line, Key: dotted(keys),
			Problem: fmt.Sprintf("used as a table, but line %d set it as a value", x.lines[id].line)}
	}
	return nil
}
