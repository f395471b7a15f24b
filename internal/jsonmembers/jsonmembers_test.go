package jsonmembers

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strings"
	"testing"
)

// rpc is the Fold a JSON-RPC server uses: the envelope, params and _meta.
var rpc = Fold{{}, {"params"}, {"params", "_meta"}}

func TestCheck(t *testing.T) {
	for _, tc := range []struct {
		in   string
		want string // "" when the text passes
	}{
		{`{}`, ""},
		{`[]`, ""},
		{`"x"`, ""},
		{`12.5e3`, ""},
		{` {"a":1,"b":[{"a":2},{"a":3}],"c":{"a":{"a":null}}} `, ""},
		{`{"a":1,"a":2}`, `duplicate member "a"`},
		{`{"name":"x","NAME":"y"}`, `duplicate member "name" (also as "NAME")`},
		{`{"params":{"name":"x","NAME":"y"}}`, `duplicate member "name" (also as "NAME") in params`},
		{`{"PARAMS":{"name":"x","Name":"y"}}`, `duplicate member "name" (also as "Name") in PARAMS`},
		{`{"params":{"_meta":{"k":1,"K":2}}}`, `duplicate member "k" (also as "K") in params._meta`},
		{`{"params":{"_META":{"k":1,"K":2}}}`, `duplicate member "k" (also as "K") in params._META`},
		// Arguments are not folded: a tool's schema may have id and ID ...
		{`{"params":{"arguments":{"id":1,"ID":2}}}`, ""},
		// ... but never the same name twice, at any depth.
		{`{"params":{"arguments":{"id":1,"id":2}}}`, `duplicate member "id" in params.arguments`},
		{`{"params":{"arguments":{"l":[{"x":1},{"y":{"z":1,"z":2}}]}}}`, `duplicate member "z" in params.arguments.l[].y`},
		{`[{"a":1},{"a":1,"a":2}]`, `duplicate member "a" in []`},
		// Objects in arrays are never folded, even on a listed path.
		{`{"params":[{"a":1,"A":2}]}`, ""},
		// Escapes are decoded before comparing, as a decoder does.
		{`{"name":1,"n\u0061me":2}`, `duplicate member "name"`},
		{`{"name":1,"N\u0041ME":2}`, `duplicate member "name" (also as "NAME")`},
		{`{"p\u0061rams":{"a":1,"A":2}}`, `duplicate member "a" (also as "A") in params`},
		{`{"a\"":1,"a\\":2}`, ""},
		{`{"a\\":1,"a\u005c":2}`, `duplicate member "a\\"`},
		// encoding/json folds Unicode too: K, k and the Kelvin sign.
		{"{\"kind\":1,\"\u212aind\":2}", "duplicate member \"kind\" (also as \"\u212aind\")"},
		{`{"s":1,"ſ":2}`, `duplicate member "s" (also as "ſ")`},
		// Distinct names stay distinct.
		{`{"a":1,"b":2,"ab":3,"ba":4,"":5}`, ""},
		{`{"":1,"":2}`, `duplicate member ""`},
	} {
		err := Check([]byte(tc.in), rpc)
		got := ""
		if err != nil {
			got = err.Error()
		}
		if got != tc.want {
			t.Errorf("Check(%s) = %q, want %q", tc.in, got, tc.want)
		}
		if ref := reference(t, []byte(tc.in), rpc); fmt.Sprint(ref) != fmt.Sprint(errOrNil(err)) {
			t.Errorf("Check(%s) = %v, the reference says %v", tc.in, err, ref)
		}
	}
}

// TestLargeObjects: past smallObject members the names are indexed; the
// answers stay the same.
func TestLargeObjects(t *testing.T) {
	obj := func(names ...string) string {
		var b strings.Builder
		b.WriteString(`{"params":{`)
		for k, n := range names {
			if k > 0 {
				b.WriteByte(',')
			}
			fmt.Fprintf(&b, "%q:{\"v\":%d}", n, k)
		}
		b.WriteString(`}}`)
		return b.String()
	}
	var names []string
	for k := range 100 {
		names = append(names, fmt.Sprint("m", k))
	}
	if err := Check([]byte(obj(names...)), rpc); err != nil {
		t.Fatalf("100 distinct members: %v", err)
	}
	for _, at := range []int{3, smallObject - 1, smallObject, smallObject + 1, 99} {
		for _, repeat := range []string{names[at-1], strings.ToUpper(names[at-1])} {
			in := obj(append(append(append([]string{}, names[:at]...), repeat), names[at:]...)...)
			var d *Duplicate
			if err := Check([]byte(in), rpc); !errors.As(err, &d) || d.Name != names[at-1] || d.Path != "params" {
				t.Errorf("%s repeated at %d: %v", repeat, at, err)
			}
			if fmt.Sprint(reference(t, []byte(in), rpc)) != fmt.Sprint(Check([]byte(in), rpc)) {
				t.Errorf("%s repeated at %d: differs from the reference", repeat, at)
			}
		}
	}
	// An unfolded large object keeps case variants apart.
	var mixed []string
	for k := range 40 {
		mixed = append(mixed, fmt.Sprint("x", k), fmt.Sprint("X", k))
	}
	if err := Check([]byte(`{"params":{"arguments":`+obj(mixed...)[len(`{"params":`):]+`}`), rpc); err != nil {
		t.Errorf("case variants in a large unfolded object: %v", err)
	}
}

func TestMalformed(t *testing.T) {
	for _, in := range []string{``, ` `, `{`, `{"a"`, `{"a":`, `{"a":1`, `{"a":1,}`, `{1:2}`, `[1,]`,
		`{"a":1}}`, `{"a":1} x`, `"abc`, `{"a\":1}`, `]`, `{]`, `[}`, `{"a" 1}`} {
		if err := Check([]byte(in), rpc); err == nil {
			// Check is no validator; it must only never accept what
			// it cannot scan. These it cannot.
			t.Errorf("Check(%q) accepted it", in)
		}
	}
}

// TestNoAllocations: a tools/call as clients send it costs no allocation.
func TestNoAllocations(t *testing.T) {
	msg := []byte(benchCall)
	if n := testing.AllocsPerRun(100, func() {
		if Check(msg, rpc) != nil {
			t.Fatal("refused")
		}
	}); n != 0 {
		t.Errorf("Check allocates %v times per call", n)
	}
}

const benchCall = `{"jsonrpc":"2.0","id":42,"method":"tools/call","params":{"name":"repo.readFile",` +
	`"arguments":{"path":"src/main.go","offset":0,"limit":2000},"_meta":{"progressToken":"p-42",` +
	`"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":{"elicitation":{"form":{}}},` +
	`"io.modelcontextprotocol/clientInfo":{"name":"bench","version":"1"}}}}`

func BenchmarkCheck(b *testing.B) {
	for _, bc := range []struct{ name, msg string }{
		{"call", benchCall},
		{"ping", `{"jsonrpc":"2.0","id":1,"method":"ping"}`},
		{"text64k", `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"fs.writeFile","arguments":{"path":"a","content":"` +
			strings.Repeat("x", 64<<10) + `"}}}`},
		{"wide200", func() string {
			var s strings.Builder
			s.WriteString(`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"t","arguments":{`)
			for k := range 200 {
				if k > 0 {
					s.WriteByte(',')
				}
				fmt.Fprintf(&s, `"key%d":%d`, k, k)
			}
			s.WriteString(`}}}`)
			return s.String()
		}()},
	} {
		msg := []byte(bc.msg)
		b.Run(bc.name, func(b *testing.B) {
			b.SetBytes(int64(len(msg)))
			b.ReportAllocs()
			for b.Loop() {
				if Check(msg, rpc) != nil {
					b.Fatal("refused")
				}
			}
		})
	}
}

// FuzzCheck compares Check with a reference built on encoding/json's own
// tokenizer on every valid JSON text, and checks it survives any other.
func FuzzCheck(f *testing.F) {
	for _, s := range []string{
		benchCall, `{}`, `[]`, `{"a":1,"a":2}`, `{"name":"x","NAME":"y"}`,
		`{"params":{"name":"x","Name":"y","arguments":{"id":1,"ID":2}}}`,
		`{"params":{"_meta":{"k":1,"\u212a":2}}}`, `{"a\\":1,"a\u005c":2}`,
		`[{"a":[{"b":{"c":1,"C":2}}]}]`, `{"a":"\"}"}`, `{"a`, "{\"\xff\":1,\"\xfe\":2}",
		`{"n":2` + strings.Repeat("0", 400) + `}`,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		err := Check(data, rpc)
		if !json.Valid(data) {
			return // it returned: no panic, no endless loop
		}
		if errors.Is(err, ErrMalformed) {
			t.Fatalf("Check(%q) calls valid JSON malformed", data)
		}
		if ref := reference(t, data, rpc); fmt.Sprint(ref) != fmt.Sprint(errOrNil(err)) {
			t.Fatalf("Check(%q) = %v, the reference says %v", data, err, ref)
		}
	})
}

func errOrNil(err error) any {
	if err == nil {
		return nil
	}
	return err
}

// reference is Check done the slow, obvious way on encoding/json's
// tokens: every object's decoded names, compared with bytes.EqualFold
// where fold lists the object and with == elsewhere.
func reference(t *testing.T, data []byte, fold Fold) any {
	t.Helper()
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.UseNumber() // numbers beyond float64 are still JSON
	type open struct {
		object bool
		fold   bool
		names  []string
		key    bool // the next token of this object is a name
	}
	type hop struct {
		name    string
		element bool
	}
	var stack []*open
	var path []hop
	var member hop
	where := func() string {
		var b strings.Builder
		for k, h := range path {
			if h.element {
				b.WriteString("[]")
				continue
			}
			if k > 0 {
				b.WriteByte('.')
			}
			b.WriteString(h.name)
		}
		return b.String()
	}
	listed := func() bool {
	next:
		for _, p := range fold {
			if len(p) != len(path) {
				continue
			}
			for k := range p {
				if path[k].element || !strings.EqualFold(p[k], path[k].name) {
					continue next
				}
			}
			return true
		}
		return false
	}
	closed := func() {
		stack = stack[:len(stack)-1]
		if len(stack) > 0 {
			path = path[:len(path)-1]
			stack[len(stack)-1].key = stack[len(stack)-1].object
		}
	}
	for {
		tok, err := dec.Token()
		if err == io.EOF {
			return nil
		}
		if err != nil {
			t.Fatalf("reference on %q: %v", data, err)
		}
		var top *open
		if len(stack) > 0 {
			top = stack[len(stack)-1]
		}
		if top != nil && top.object && top.key {
			if d, ok := tok.(json.Delim); ok && d == '}' {
				closed()
				continue
			}
			name := tok.(string)
			for _, n := range top.names {
				if n == name {
					return &Duplicate{Path: where(), Name: n}
				}
				if top.fold && strings.EqualFold(n, name) {
					return &Duplicate{Path: where(), Name: n, Other: name}
				}
			}
			top.names = append(top.names, name)
			top.key = false
			member = hop{name: name}
			continue
		}
		if top != nil && !top.object {
			member = hop{element: true}
		}
		switch d, _ := tok.(json.Delim); d {
		case '{', '[':
			if top != nil {
				path = append(path, member)
			}
			o := &open{object: d == '{', key: d == '{'}
			o.fold = o.object && listed()
			stack = append(stack, o)
		case '}', ']':
			closed()
		default:
			if top != nil {
				top.key = top.object
			}
		}
	}
}
