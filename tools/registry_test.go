package tools

import (
	"context"
	"encoding/json"
	"strings"
	"testing"

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
	_, err = e.Validate(json.RawMessage(`{"n":0,"x":1}`))
	te, ok := AsError(err)
	if !ok || te.Kind != KindInvalidArgument {
		t.Fatalf("want invalid_argument, got %v", err)
	}
	for _, want := range []string{"/n", "x", "s"} {
		if !strings.Contains(te.Message, want) {
			t.Errorf("violations %q do not mention %q", te.Message, want)
		}
	}
	for _, bad := range []string{`[]`, `"x"`, `{`} {
		if _, err := e.Validate(json.RawMessage(bad)); err == nil {
			t.Errorf("arguments %s accepted", bad)
		}
	}
	if args, err := e.Validate(nil); err == nil || args != nil {
		t.Errorf("missing required s: %v", err)
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
