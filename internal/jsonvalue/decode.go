package jsonvalue

import (
	"encoding/json"
	"fmt"
	"unicode/utf16"
	"unicode/utf8"
)

// maxDepth is encoding/json's limit on nested arrays and objects.
const maxDepth = 10000

// SyntaxError says where data stops being one JSON value.
type SyntaxError struct {
	// Offset is the byte at which the problem was found.
	Offset int
	// Problem says what is wrong there.
	Problem string
}

func (e *SyntaxError) Error() string {
	return fmt.Sprintf("invalid JSON at byte %d: %s", e.Offset, e.Problem)
}

// Decode parses data, one JSON value with optional white space around
// it, into the value a json.Decoder with UseNumber would give an `any`:
// objects as map[string]any (the last of duplicate members wins), arrays
// as []any, numbers as json.Number (their text), strings with invalid
// UTF-8 and unpaired surrogates replaced by U+FFFD. It accepts and refuses
// the same inputs as that decoder does followed by a check that only
// white space is left (jsonschema.UnmarshalJSON); a refusal is a
// *SyntaxError.
//
// It copies data once; the strings in the value share that copy.
func Decode(data []byte) (any, error) {
	d := decoder{s: string(data)}
	d.space()
	v, err := d.value(0)
	if err != nil {
		return nil, err
	}
	if d.space(); d.i < len(d.s) {
		return nil, d.fail("after the value")
	}
	return v, nil
}

// decoder reads one value from s, from i on.
type decoder struct {
	s     string
	i     int
	stack []any // the elements of the arrays being read
}

func (d *decoder) fail(problem string) error {
	if d.i >= len(d.s) {
		return &SyntaxError{Offset: d.i, Problem: "unexpected end " + problem}
	}
	return &SyntaxError{Offset: d.i, Problem: fmt.Sprintf("unexpected %q %s", d.s[d.i], problem)}
}

// space skips JSON's white space.
func (d *decoder) space() {
	for d.i < len(d.s) {
		switch d.s[d.i] {
		case ' ', '\t', '\n', '\r':
			d.i++
		default:
			return
		}
	}
}

// value reads the value at i, which is not white space; depth counts the
// arrays and objects it is in.
func (d *decoder) value(depth int) (any, error) {
	if d.i >= len(d.s) {
		return nil, d.fail("looking for a value")
	}
	switch c := d.s[d.i]; {
	case c == '{':
		return d.object(depth + 1)
	case c == '[':
		return d.array(depth + 1)
	case c == '"':
		return d.str()
	case c == '-' || c >= '0' && c <= '9':
		return d.number()
	case c == 't':
		return true, d.literal("true")
	case c == 'f':
		return false, d.literal("false")
	case c == 'n':
		return nil, d.literal("null")
	}
	return nil, d.fail("looking for a value")
}

func (d *decoder) literal(word string) error {
	if len(d.s)-d.i < len(word) || d.s[d.i:d.i+len(word)] != word {
		for j := 0; j < len(word) && d.i < len(d.s) && d.s[d.i] == word[j]; j++ {
			d.i++ // point at the first wrong byte
		}
		return d.fail("in literal " + word)
	}
	d.i += len(word)
	return nil
}

func (d *decoder) object(depth int) (any, error) {
	if depth > maxDepth {
		return nil, d.fail("nested too deeply")
	}
	d.i++ // {
	m := make(map[string]any)
	more := d.first('}')
	for more {
		if d.i >= len(d.s) || d.s[d.i] != '"' {
			return nil, d.fail("looking for an object key")
		}
		k, err := d.text()
		if err != nil {
			return nil, err
		}
		if d.space(); d.i >= len(d.s) || d.s[d.i] != ':' {
			return nil, d.fail("after an object key")
		}
		d.i++
		d.space()
		v, err := d.value(depth)
		if err != nil {
			return nil, err
		}
		m[k] = v
		if more, err = d.next('}', "after an object member"); err != nil {
			return nil, err
		}
	}
	return m, nil
}

func (d *decoder) array(depth int) (any, error) {
	if depth > maxDepth {
		return nil, d.fail("nested too deeply")
	}
	d.i++ // [
	if !d.first(']') {
		return []any{}, nil
	}
	// The elements wait on the decoder's stack (arrays inside push theirs
	// above them), so the array is allocated once, at its size.
	if d.stack == nil {
		d.stack = make([]any, 0, 16)
	}
	base := len(d.stack)
	for more := true; more; {
		v, err := d.value(depth)
		if err != nil {
			return nil, err
		}
		d.stack = append(d.stack, v)
		if more, err = d.next(']', "after an array element"); err != nil {
			return nil, err
		}
	}
	a := make([]any, len(d.stack)-base)
	copy(a, d.stack[base:])
	clear(d.stack[base:])
	d.stack = d.stack[:base]
	return a, nil
}

// first skips the space after an array's or object's opening and reports
// whether a first element follows; it consumes end when none does.
func (d *decoder) first(end byte) bool {
	d.space()
	if d.i < len(d.s) && d.s[d.i] == end {
		d.i++
		return false
	}
	return true
}

// next reads what follows an element or member: a comma (true: another
// follows, its space skipped) or end (false, consumed).
func (d *decoder) next(end byte, where string) (bool, error) {
	d.space()
	if d.i < len(d.s) {
		switch d.s[d.i] {
		case ',':
			d.i++
			d.space()
			return true, nil
		case end:
			d.i++
			return false, nil
		}
	}
	return false, d.fail(where)
}

// number reads a number's text as encoding/json's scanner accepts it:
// -?(0|[1-9][0-9]*)(\.[0-9]+)?([eE][+-]?[0-9]+)?
func (d *decoder) number() (any, error) {
	start := d.i
	if d.s[d.i] == '-' {
		d.i++
	}
	switch {
	case d.i < len(d.s) && d.s[d.i] == '0':
		d.i++
	case d.digits() == 0:
		return nil, d.fail("in a number")
	}
	if d.i < len(d.s) && d.s[d.i] == '.' {
		d.i++
		if d.digits() == 0 {
			return nil, d.fail("after a number's decimal point")
		}
	}
	if d.i < len(d.s) && (d.s[d.i] == 'e' || d.s[d.i] == 'E') {
		d.i++
		if d.i < len(d.s) && (d.s[d.i] == '+' || d.s[d.i] == '-') {
			d.i++
		}
		if d.digits() == 0 {
			return nil, d.fail("in a number's exponent")
		}
	}
	return json.Number(d.s[start:d.i]), nil
}

func (d *decoder) digits() int {
	start := d.i
	for d.i < len(d.s) && d.s[d.i] >= '0' && d.s[d.i] <= '9' {
		d.i++
	}
	return d.i - start
}

func (d *decoder) str() (any, error) {
	s, err := d.text()
	if err != nil {
		return nil, err
	}
	return s, nil
}

// text reads the string at i (its opening quote). A string without
// escapes or invalid UTF-8 is a slice of s; any other is built anew.
func (d *decoder) text() (string, error) {
	d.i++ // "
	start := d.i
	for d.i < len(d.s) {
		c := d.s[d.i]
		switch {
		case c == '"':
			d.i++
			return d.s[start : d.i-1], nil
		case c == '\\' || c < ' ':
			return d.unquote(start)
		case c < utf8.RuneSelf:
			d.i++
		default:
			r, size := utf8.DecodeRuneInString(d.s[d.i:])
			if r == utf8.RuneError && size == 1 {
				return d.unquote(start)
			}
			d.i += size
		}
	}
	return "", d.fail("in a string")
}

// unquote finishes the string begun at start, i being at its first
// escape, control character or invalid UTF-8, as encoding/json does:
// escapes decoded, surrogate pairs joined, each unpaired surrogate and
// each byte of invalid UTF-8 turned into U+FFFD.
func (d *decoder) unquote(start int) (string, error) {
	b := make([]byte, 0, d.i-start+16)
	b = append(b, d.s[start:d.i]...)
	for d.i < len(d.s) {
		switch c := d.s[d.i]; {
		case c == '"':
			d.i++
			return string(b), nil
		case c < ' ':
			return "", d.fail("in a string (a control character)")
		case c == '\\':
			d.i++
			if d.i >= len(d.s) {
				return "", d.fail("in a string escape")
			}
			switch e := d.s[d.i]; e {
			case '"', '\\', '/':
				b = append(b, e)
			case 'b':
				b = append(b, '\b')
			case 'f':
				b = append(b, '\f')
			case 'n':
				b = append(b, '\n')
			case 'r':
				b = append(b, '\r')
			case 't':
				b = append(b, '\t')
			case 'u':
				r, ok := d.hex4(d.i + 1)
				if !ok {
					return "", d.fail("in a \\u escape")
				}
				d.i += 4
				if utf16.IsSurrogate(r) {
					if d.i+2 < len(d.s) && d.s[d.i+1] == '\\' && d.s[d.i+2] == 'u' {
						if r2, ok := d.hex4(d.i + 3); ok {
							if pair := utf16.DecodeRune(r, r2); pair != utf8.RuneError {
								d.i += 6
								b = utf8.AppendRune(b, pair)
								break
							}
						}
					}
					r = utf8.RuneError
				}
				b = utf8.AppendRune(b, r)
			default:
				return "", d.fail("in a string escape")
			}
			d.i++
		case c < utf8.RuneSelf:
			b = append(b, c)
			d.i++
		default:
			r, size := utf8.DecodeRuneInString(d.s[d.i:])
			b = utf8.AppendRune(b, r) // U+FFFD for a byte of invalid UTF-8
			d.i += size
		}
	}
	return "", d.fail("in a string")
}

// hex4 reads the four hex digits at j.
func (d *decoder) hex4(j int) (rune, bool) {
	if j+4 > len(d.s) {
		return 0, false
	}
	var r rune
	for _, c := range []byte(d.s[j : j+4]) {
		switch {
		case c >= '0' && c <= '9':
			c -= '0'
		case c >= 'a' && c <= 'f':
			c -= 'a' - 10
		case c >= 'A' && c <= 'F':
			c -= 'A' - 10
		default:
			return 0, false
		}
		r = r<<4 | rune(c)
	}
	return r, true
}
