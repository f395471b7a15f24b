package tools

import (
	"context"
	"encoding/json"
	"reflect"
	"strings"
	"testing"

	"github.com/santhosh-tekuri/jsonschema/v6"

	"troupe/protocol"
)

type stub struct{ spec Spec }

func (s stub) Spec() Spec { return s.spec }
func (s stub) Call(context.Context, *Request) (*protocol.CallToolResult, error) {
	return StructuredResult(map[string]bool{"ok": true})
}

func obj(name, schema string) Tool {
	return stub{Spec{Name: name, InputSchema: json.RawMessage(schema)}}
}

func TestNewRegistryRefusesBadTools(t *testing.T) {
	cases := map[string][]Tool{
		"1 to 128":          {obj("", `{"type":"object"}`)},
		"character":         {obj("has space", `{"type":"object"}`)},
		"registered twice":  {obj("a", `{"type":"object"}`), obj("a", `{"type":"object"}`)},
		"not JSON":          {obj("a", `{`)},
		"type \"object\"":   {obj("a", `{"type":"string"}`)},
		"does not compile":  {obj("a", `{"type":"object","properties":{"x":{"type":"nope"}}}`)},
		"schema is missing": {obj("a", ``)},
	}
	for want, ts := range cases {
		if _, err := NewRegistry(ts...); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("want an error mentioning %q, got %v", want, err)
		}
	}
}

func TestValidateListsEveryViolation(t *testing.T) {
	r, err := NewRegistry(obj("t", `{"type":"object","properties":{"n":{"type":"integer","minimum":1},"s":{"type":"string"}},"required":["s"],"additionalProperties":false}`))
	if err != nil {
		t.Fatal(err)
	}
	e, _ := r.Lookup("t")
	_, err = e.Check(json.RawMessage(`{"n":0,"x":1}`))
	te, ok := AsError(err)
	if !ok || te.Kind != KindInvalidArgument {
		t.Fatalf("want invalid_argument, got %v", err)
	}
	for _, want := range []string{"/n", "x", "s"} {
		if !strings.Contains(te.Message, want) {
			t.Errorf("violations %q do not mention %q", te.Message, want)
		}
	}
	for _, bad := range []string{`[]`, `"x"`, `{`, `{} {}`, `{"s":"a"} x`} {
		if _, err := e.Check(json.RawMessage(bad)); err == nil {
			t.Errorf("arguments %s accepted", bad)
		}
	}
	if args, err := e.Check(nil); err == nil || args.Raw != nil || args.Value != nil {
		t.Errorf("missing required s: %v", err)
	}
}

// TestCheckReturnsWhatItValidated: the decoded value is the one
// jsonschema's own decoder gives (numbers as json.Number), so that the
// schema sees what it always saw, and the text is the call's.
func TestCheckReturnsWhatItValidated(t *testing.T) {
	r, err := NewRegistry(obj("t", `{"type":"object","properties":{"n":{"type":"integer"}}}`),
		stub{Spec{Name: "own", InputSchema: json.RawMessage(`{"type":"object","required":["x"]}`), ServerValidates: true}})
	if err != nil {
		t.Fatal(err)
	}
	e, _ := r.Lookup("t")
	for _, raw := range []string{`{"n":5.0,"s":"\u00e9\ud800","a":[1,{"b":null}],"t":true}`, ` {} `} {
		a, err := e.Check(json.RawMessage(raw))
		if err != nil {
			t.Fatalf("%s: %v", raw, err)
		}
		want, _ := jsonschema.UnmarshalJSON(strings.NewReader(raw))
		if string(a.Raw) != raw || !reflect.DeepEqual(any(a.Value), want) {
			t.Errorf("Check(%s) = %s, %#v; want the text and %#v", raw, a.Raw, a.Value, want)
		}
	}
	for _, empty := range []string{``, ` `, `null`, ` null `} {
		a, err := e.Check(json.RawMessage(empty))
		if err != nil || string(a.Raw) != "{}" || a.Value == nil || len(a.Value) != 0 {
			t.Errorf("Check(%q) = %s, %#v, %v; want {}", empty, a.Raw, a.Value, err)
		}
	}
	own, _ := r.Lookup("own") // its server checks the arguments; they must still be an object
	if a, err := own.Check(json.RawMessage(`{"y":1}`)); err != nil || a.Value["y"] != json.Number("1") {
		t.Errorf("a server-validated tool's arguments: %#v, %v", a, err)
	}
	if _, err := own.Check(json.RawMessage(`[1]`)); err == nil {
		t.Error("a server-validated tool accepts an array")
	}
	if raw, err := e.Validate(json.RawMessage(`{"n":1}`)); err != nil || string(raw) != `{"n":1}` {
		t.Errorf("Validate = %s, %v", raw, err)
	}
}

func TestPage(t *testing.T) {
	r, _ := NewRegistry(obj("c", `{"type":"object"}`), obj("a", `{"type":"object"}`), obj("b", `{"type":"object"}`))
	page, more := r.Page(0, 2)
	if len(page) != 2 || page[0].Name != "a" || page[1].Name != "b" || !more {
		t.Fatalf("first page %v more=%v", page, more)
	}
	if page, more = r.Page(2, 2); len(page) != 1 || more {
		t.Fatalf("last page %v more=%v", page, more)
	}
	var zero *Registry
	if page, more = zero.Page(0, 5); len(page) != 0 || more || zero.Len() != 0 {
		t.Fatal("a nil registry is empty")
	}
}

func TestErrorResult(t *testing.T) {
	r := Errorf(KindNotFound, "no %s", "file").Result("c-1")
	b, _ := json.Marshal(r)
	if !r.IsError || !strings.Contains(string(b), `"kind":"not_found"`) || !strings.Contains(string(b), "c-1") {
		t.Fatalf("%s", b)
	}
}
