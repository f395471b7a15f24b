package jsonvalue_test

import (
	"bytes"
	"encoding/json"
	"io"
	"math"
	"reflect"
	"strings"
	"testing"

	"troupe/internal/jsonvalue"
)

// seeds are JSON texts and near misses that reach every branch.
var seeds = []string{
	`{}`, `[]`, ` {"a" : [1, -0, 0.5, 1e2, 1E-7, -1.5e+300, 1e400, 12345678901234567890] } `,
	`{"b":1,"a":2,"é":3,"A":4,"<":5,"dup":1,"dup":2,"\u0000":6,"":7}`,
	`{"s":"<a href='x'>&amp;</a>","c":"\u0000\u0001\b\f\n\r\t\u001f\u007f","sep":"\u2028\u2029 ` + "\u2028" + `"}`,
	`{"e":"\"\\\/","emoji":"\ud83d\ude00 é 中 😀","lone":"\ud800 \udc00 \ud800\ud800 \udbff\udfff","bad":"` + "\xff\xfe \xe2\x82 \xed\xa0\x80" + `"}`,
	`[true,false,null,[[[]]],{"x":{"y":[1,2,3,4,5,6,7,8,9,10,11,12,13,14,15,16,17,18]}}]`,
	`"text"`, `0`, `-`, `01`, `1.`, `1e`, `.5`, `+1`, `tru`, `nul`, `{"a"}`, `{"a":}`, `{,}`, `[1,]`, `[1 2]`,
	`{"a":1}x`, `{} {}`, `"\x"`, `"\u12"`, `"\u12g4"`, `"` + "\x01" + `"`, `"\'"`, `"abc`, `[`, "\ufeff{}", `{"a":1,}`,
}

// stdDecode is the decoder Decode must agree with: jsonschema.UnmarshalJSON.
func stdDecode(data []byte) (any, error) {
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.UseNumber()
	var v any
	if err := dec.Decode(&v); err != nil {
		return nil, err
	}
	if _, err := dec.Token(); err != io.EOF {
		return nil, io.ErrUnexpectedEOF // anything but white space after the value
	}
	return v, nil
}

func FuzzDecode(f *testing.F) {
	for _, s := range seeds {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		want, wantErr := stdDecode(data)
		got, err := jsonvalue.Decode(data)
		if (err != nil) != (wantErr != nil) {
			t.Fatalf("Decode(%q): error %v, encoding/json: %v", data, err, wantErr)
		}
		if !reflect.DeepEqual(got, want) {
			t.Fatalf("Decode(%q) = %#v, encoding/json: %#v", data, got, want)
		}
		if err != nil {
			return
		}
		// The canonical form is what the first hash wrote: encoding/json's
		// encoding of what json.Unmarshal gives (errors ignored).
		var std any
		_ = json.Unmarshal(data, &std)
		wantText, _ := json.Marshal(std)
		if text := jsonvalue.AppendCanonical(nil, got); !bytes.Equal(text, wantText) {
			t.Fatalf("AppendCanonical(Decode(%q)) = %s, encoding/json: %s", data, text, wantText)
		}
		if text := jsonvalue.AppendCanonical(nil, std); !bytes.Equal(text, wantText) {
			t.Fatalf("AppendCanonical(json.Unmarshal(%q)) = %s, encoding/json: %s", data, text, wantText)
		}
	})
}

func FuzzAppendString(f *testing.F) {
	for _, s := range seeds {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		want, _ := json.Marshal(s)
		if got := jsonvalue.AppendString([]byte("x"), s); !bytes.Equal(got[1:], want) || got[0] != 'x' {
			t.Fatalf("AppendString(%q) = %s, encoding/json: %s", s, got, want)
		}
		if got := jsonvalue.AppendString(nil, []byte(s)); !bytes.Equal(got, want) {
			t.Fatalf("AppendString([]byte(%q)) = %s, encoding/json: %s", s, got, want)
		}
		var back string
		if err := json.Unmarshal(want, &back); err != nil || back != strings.ToValidUTF8(back, "\ufffd") {
			t.Fatalf("%s does not decode to valid text: %q, %v", want, back, err)
		}
		list := []string{s, "", s + s}
		m := map[string]string{s: "1", "": s, s + "z": s}
		for _, c := range []struct {
			got []byte
			v   any
		}{
			{jsonvalue.AppendStrings(nil, list), list}, {jsonvalue.AppendStrings(nil, nil), []string(nil)},
			{jsonvalue.AppendStringMap(nil, m), m}, {jsonvalue.AppendStringMap(nil, nil), map[string]string(nil)},
		} {
			if want, _ := json.Marshal(c.v); !bytes.Equal(c.got, want) {
				t.Fatalf("%#v: %s, encoding/json: %s", c.v, c.got, want)
			}
		}
	})
}

func FuzzAppendFloat(f *testing.F) {
	for _, x := range []float64{0, math.Copysign(0, -1), 1, 0.1, 1e-6, 1e-7, 9.99e20, 1e21, math.MaxFloat64, math.SmallestNonzeroFloat64, -123.456e-300} {
		f.Add(math.Float64bits(x))
	}
	f.Fuzz(func(t *testing.T, bits uint64) {
		x := math.Float64frombits(bits)
		want, err := json.Marshal(x)
		if err != nil {
			want = []byte("null") // NaN, ±Inf
		}
		if got := jsonvalue.AppendFloat(nil, x); !bytes.Equal(got, want) {
			t.Fatalf("AppendFloat(%v) = %s, encoding/json: %s", x, got, want)
		}
	})
}

func TestDepthLimit(t *testing.T) {
	for _, depth := range []int{10000, 10001} {
		for _, open := range []string{"[", `{"a":`} {
			close := map[string]string{"[": "]", `{"a":`: "}"}[open]
			data := []byte(strings.Repeat(open, depth) + "1" + strings.Repeat(close, depth))
			_, wantErr := stdDecode(data)
			if _, err := jsonvalue.Decode(data); (err != nil) != (wantErr != nil) {
				t.Errorf("depth %d of %s: error %v, encoding/json: %v", depth, open, err, wantErr)
			}
		}
	}
}

func TestCanonicalOtherTypes(t *testing.T) {
	for _, v := range []any{3, map[string]int{"b": 1, "a": 2}, []any(nil), map[string]any(nil), json.Number("1e400"), func() {}} {
		want, err := json.Marshal(v)
		if err != nil {
			want = []byte("null")
		}
		if n, ok := v.(json.Number); ok && n == "1e400" {
			want = []byte("null")
		}
		if got := jsonvalue.AppendCanonical(nil, v); !bytes.Equal(got, want) {
			t.Errorf("AppendCanonical(%#v) = %s, want %s", v, got, want)
		}
	}
}
