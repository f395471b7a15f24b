// Package jsonmembers finds JSON objects that name a member twice, in one
// pass over the text and without allocating for objects of up to 16
// members.
//
// A message with a repeated member reads differently to different
// decoders: encoding/json keeps the last of two equal names, and matches
// names to struct fields case-insensitively (so "name" and "NAME" both
// fill Name, the last one winning), while a lookup in a
// map[string]json.RawMessage sees one exact key. When one part of a
// program checks a value by one reading and another part uses it by the
// other, the check does not hold (troupe's 2026-07-28 Mcp-Name check once
// read params by map while the session decoded them into a struct). Check
// refuses such text before anything reads it: every object must name each
// member once, and the objects a Fold lists must also not name one in two
// spellings that differ only in case, as encoding/json compares them
// (bytes.EqualFold, with escapes decoded).
//
// Check is no validator: it expects one valid JSON value (it runs after a
// decoder has accepted the text). Text that is not JSON gets ErrMalformed
// where the scan cannot go on, or passes; it never makes Check panic, loop
// or read out of bounds.
package jsonmembers

import (
	"bytes"
	"encoding/json"
	"errors"
	"strconv"
	"strings"
	"unicode"
	"unicode/utf8"
)

// ErrMalformed is Check's answer for text that is not one JSON value.
var ErrMalformed = errors.New("jsonmembers: not a JSON value")

// Fold lists the objects whose member names must also differ by more than
// case: those that decode into Go structs. Each entry is the path of
// member names from the root value to the object, the root itself being
// the empty path. Names on the path match case-insensitively too, as
// encoding/json matches them to struct fields: {"PARAMS":{…}} fills the
// same field as {"params":{…}}. Objects inside arrays are never listed.
type Fold [][]string

// Duplicate is an object that names a member twice. It is Check's error.
type Duplicate struct {
	// Path is where the object is: "" for the root value, else its members'
	// names from the root joined by "." ("params._meta"), with "[]" for an
	// array's element ("params.arguments.list[]").
	Path string
	// Name is the member's name as the object first gives it.
	Name string
	// Other is its second spelling when that differs from Name (only in
	// case, in an object Fold lists); "" for an exact repeat.
	Other string
}

// Error says which member is named twice: `duplicate member "name" (also
// as "NAME") in params`.
func (d *Duplicate) Error() string {
	var b strings.Builder
	b.WriteString("duplicate member ")
	b.WriteString(quote(d.Name))
	if d.Other != "" {
		b.WriteString(" (also as ")
		b.WriteString(quote(d.Other))
		b.WriteString(")")
	}
	if d.Path != "" {
		b.WriteString(" in ")
		b.WriteString(quoteLimit(d.Path, 200))
	}
	return b.String()
}

// quote quotes a member name for a message, cut to a readable length.
func quote(s string) string { return strconv.Quote(quoteLimit(s, 80)) }

func quoteLimit(s string, max int) string {
	if len(s) <= max {
		return s
	}
	cut := max
	for cut > 0 && !utf8.RuneStart(s[cut]) {
		cut--
	}
	return s[:cut] + "…"
}

// smallObject is how many members an object may have before Check indexes
// its names in a map; below it names are compared pairwise, which for the
// small objects of JSON-RPC is faster than hashing and allocates nothing.
const smallObject = 16

// name is a member's name, without pointers (so the scan's arrays need no
// write barriers and no clearing): data[from:to], or decoded[from:to] for
// a name that had escapes.
type name struct {
	from, to int
	decoded  bool
}

// step is how a value is reached from the one around it: a member's name,
// or as an element of an array.
type step struct {
	name    name
	element bool
}

// frame is an array or object being read.
type frame struct {
	object bool
	fold   bool // names are compared as encoding/json matches fields
	first  int  // index in names of the object's first member
	// index is 1 + the index in indexes of the map from each member name
	// (folded when fold) to its index in names, made once the object has
	// more than smallObject members; 0 before.
	index int
}

// scan is the text being checked and the names met so far.
type scan struct {
	data    []byte
	decoded []byte // the names that had escapes, decoded, one after another
	indexes []map[string]int
}

// bytes is n's text.
func (s *scan) bytes(n name) []byte {
	if n.decoded {
		return s.decoded[n.from:n.to]
	}
	return s.data[n.from:n.to]
}

// Check reports the first object in data (one JSON value) that names a
// member twice, as a *Duplicate, or ErrMalformed when data is not one JSON
// value; nil when every object names each member once.
func Check(data []byte, fold Fold) error {
	var (
		frameBuf [16]frame
		nameBuf  [32]name
		pathBuf  [16]step
	)
	s := scan{data: data}
	names := nameBuf[:0] // the member names of the open objects, outermost first
	frames := frameBuf[:0]
	path := pathBuf[:0] // how the open values are reached: one entry per frame but the root's
	foldDepth := -1
	for _, p := range fold {
		foldDepth = max(foldDepth, len(p))
	}
	var member step // how the next value is reached
	i := 0
	const (
		wantValue = iota
		wantName
		afterValue
	)
	state := wantValue
	for {
		i = space(data, i)
		if i >= len(data) {
			if state == afterValue && len(frames) == 0 {
				return nil
			}
			return ErrMalformed
		}
		switch state {
		case wantValue:
			switch c := data[i]; c {
			case '{', '[':
				if len(frames) > 0 {
					path = append(path, member)
				}
				f := frame{object: c == '{', first: len(names)}
				if f.object && len(path) <= foldDepth {
					f.fold = s.lists(fold, path)
				}
				frames = append(frames, f)
				i = space(data, i+1)
				if i < len(data) && (data[i] == '}' && f.object || data[i] == ']' && !f.object) {
					i++
					frames, names, path = s.pop(frames, names, path)
					state = afterValue
				} else if f.object {
					state = wantName
				} else {
					member = step{element: true}
				}
			case '"':
				end, _, ok := stringEnd(data, i)
				if !ok {
					return ErrMalformed
				}
				i, state = end, afterValue
			default:
				j := i
				for j < len(data) && !delimiter(data[j]) {
					j++
				}
				if j == i {
					return ErrMalformed
				}
				i, state = j, afterValue
			}
		case wantName:
			if data[i] != '"' {
				return ErrMalformed
			}
			end, escaped, ok := stringEnd(data, i)
			if !ok {
				return ErrMalformed
			}
			n := name{from: i + 1, to: end - 1}
			if escaped || !utf8.Valid(data[n.from:n.to]) {
				// Compare what a decoder sees: escapes decoded, bad
				// bytes replaced.
				var text string
				if json.Unmarshal(data[i:end], &text) != nil {
					return ErrMalformed
				}
				n = name{from: len(s.decoded), to: len(s.decoded) + len(text), decoded: true}
				s.decoded = append(s.decoded, text...)
			}
			i = space(data, end)
			if i >= len(data) || data[i] != ':' {
				return ErrMalformed
			}
			i++
			if at := s.find(&frames[len(frames)-1], names, n); at >= 0 {
				return s.duplicate(path, names[at], n)
			}
			names = append(names, n)
			member, state = step{name: n}, wantValue
		case afterValue:
			if len(frames) == 0 {
				return ErrMalformed // something after the value
			}
			f := &frames[len(frames)-1]
			switch c := data[i]; {
			case c == ',':
				i++
				if f.object {
					state = wantName
				} else {
					member, state = step{element: true}, wantValue
				}
			case c == '}' && f.object, c == ']' && !f.object:
				i++
				frames, names, path = s.pop(frames, names, path)
			default:
				return ErrMalformed
			}
		}
	}
}

// pop closes the innermost array or object.
func (s *scan) pop(frames []frame, names []name, path []step) ([]frame, []name, []step) {
	f := frames[len(frames)-1]
	frames = frames[:len(frames)-1]
	names = names[:f.first]
	if f.index > 0 {
		s.indexes[f.index-1] = nil // the map is garbage; its slot stays used
	}
	if len(frames) > 0 {
		path = path[:len(path)-1]
	}
	return frames, names, path
}

// find returns the index in names of a member of f that n repeats, or
// -1; past smallObject members it keeps f's index up to date.
func (s *scan) find(f *frame, names []name, n name) int {
	own := names[f.first:]
	text := s.bytes(n)
	if f.index == 0 && len(own) < smallObject {
		for k, o := range own {
			if f.fold && bytes.EqualFold(s.bytes(o), text) || !f.fold && bytes.Equal(s.bytes(o), text) {
				return f.first + k
			}
		}
		return -1
	}
	if f.index == 0 {
		index := make(map[string]int, 2*smallObject)
		for k, o := range own {
			index[key(f.fold, s.bytes(o))] = f.first + k
		}
		s.indexes = append(s.indexes, index)
		f.index = len(s.indexes)
	}
	index := s.indexes[f.index-1]
	k := key(f.fold, text)
	if at, ok := index[k]; ok {
		return at
	}
	index[k] = len(names)
	return -1
}

// key is a name as an index holds it: folded when the object compares
// names case-insensitively.
func key(fold bool, text []byte) string {
	if !fold {
		return string(text)
	}
	return string(appendFolded(nil, text))
}

// appendFolded appends name with each rune replaced by the smallest rune
// of its case-folding orbit, so that two names fold alike exactly when
// bytes.EqualFold says they are equal (encoding/json folds names so).
func appendFolded(out, name []byte) []byte {
	for i := 0; i < len(name); {
		if c := name[i]; c < utf8.RuneSelf {
			if 'a' <= c && c <= 'z' {
				c -= 'a' - 'A'
			}
			out = append(out, c)
			i++
			continue
		}
		r, n := utf8.DecodeRune(name[i:])
		out = utf8.AppendRune(out, foldRune(r))
		i += n
	}
	return out
}

// foldRune is the smallest rune of r's case-folding orbit.
func foldRune(r rune) rune {
	for {
		r2 := unicode.SimpleFold(r)
		if r2 <= r {
			return r2
		}
		r = r2
	}
}

// lists reports whether the object at path is one of fold's.
func (s *scan) lists(fold Fold, path []step) bool {
next:
	for _, p := range fold {
		if len(p) != len(path) {
			continue
		}
		for k := range p {
			if path[k].element || !equalFold(p[k], s.bytes(path[k].name)) {
				continue next
			}
		}
		return true
	}
	return false
}

// duplicate is the error for first, repeated as second, in the object at
// path.
func (s *scan) duplicate(path []step, firstName, secondName name) *Duplicate {
	first, second := s.bytes(firstName), s.bytes(secondName)
	d := &Duplicate{Name: string(first)}
	if !bytes.Equal(first, second) {
		d.Other = string(second)
	}
	var b strings.Builder
	for k, p := range path {
		switch {
		case p.element:
			b.WriteString("[]")
		default:
			if k > 0 {
				b.WriteByte('.')
			}
			b.Write(s.bytes(p.name))
		}
	}
	d.Path = b.String()
	return d
}

// equalFold is bytes.EqualFold of a string and bytes, without converting
// either.
func equalFold(s string, b []byte) bool {
	for s != "" && len(b) > 0 {
		if s[0] < utf8.RuneSelf && b[0] < utf8.RuneSelf {
			x, y := s[0], b[0]
			if 'A' <= x && x <= 'Z' {
				x += 'a' - 'A'
			}
			if 'A' <= y && y <= 'Z' {
				y += 'a' - 'A'
			}
			if x != y {
				return false
			}
			s, b = s[1:], b[1:]
			continue
		}
		r, n := utf8.DecodeRuneInString(s)
		q, m := utf8.DecodeRune(b)
		if foldRune(r) != foldRune(q) {
			return false
		}
		s, b = s[n:], b[m:]
	}
	return s == "" && len(b) == 0
}

// space skips JSON's white space from i.
func space(data []byte, i int) int {
	for i < len(data) {
		switch data[i] {
		case ' ', '\t', '\n', '\r':
			i++
		default:
			return i
		}
	}
	return i
}

// delimiter reports whether c ends a number or literal.
func delimiter(c byte) bool {
	switch c {
	case ',', '}', ']', ':', '"', '{', '[', ' ', '\t', '\n', '\r':
		return true
	}
	return false
}

// stringEnd returns the index just past the string that starts at i
// (data[i] is '"'), and whether it holds a backslash escape.
func stringEnd(data []byte, i int) (end int, escaped, ok bool) {
	j := i + 1
	for {
		k := bytes.IndexByte(data[j:], '"')
		if k < 0 {
			return 0, false, false
		}
		q := j + k
		n := 0 // backslashes right before the quote
		for p := q - 1; p > i && data[p] == '\\'; p-- {
			n++
		}
		if n%2 == 0 {
			return q + 1, n > 0 || bytes.IndexByte(data[i+1:q], '\\') >= 0, true
		}
		j = q + 1
	}
}
