package protocol

import (
	"encoding/json"
	"testing"
)

// An InputRequiredResult encodes as the map literal it replaced did (the
// same members, in the same order), before and after DecorateResult, so
// the wire bytes did not change when it became a type.
func TestInputRequiredResultEncodesAsTheMapItReplaced(t *testing.T) {
	form := &ElicitRequestParams{Mode: "form", Message: "run <tool> & see?",
		RequestedSchema: ElicitSchema{Type: "object", Properties: map[string]any{"decision": map[string]any{"type": "string"}}},
		Meta:            map[string]any{"persist": []string{"session"}}}
	question, err := ElicitInputRequest(form)
	if err != nil {
		t.Fatal(err)
	}
	typed, err := json.Marshal(NewInputRequired(map[string]json.RawMessage{"approval": question}, "s1"))
	if err != nil {
		t.Fatal(err)
	}
	old, _ := json.Marshal(map[string]any{
		"resultType":    "input_required",
		"inputRequests": map[string]any{"approval": map[string]any{"method": MethodElicitationCreate, "params": form}},
		"requestState":  "s1",
	})
	if string(typed) != string(old) {
		t.Fatalf("typed result encodes differently:\n got %s\nwant %s", typed, old)
	}
	const golden = `{"inputRequests":{"approval":{"method":"elicitation/create","params":{"mode":"form","message":"run \u003ctool\u003e \u0026 see?","requestedSchema":{"type":"object","properties":{"decision":{"type":"string"}}},"_meta":{"persist":["session"]}}}},"requestState":"s1","resultType":"input_required"}`
	if string(typed) != golden {
		t.Fatalf("got %s\nwant %s", typed, golden)
	}
	info := &Implementation{Name: "troupe", Version: "1"}
	a, err := DecorateResult(typed, Completion{ServerInfo: info})
	if err != nil {
		t.Fatal(err)
	}
	b, _ := DecorateResult(old, Completion{ServerInfo: info})
	if string(a) != string(b) {
		t.Fatalf("decorated:\n got %s\nwant %s", a, b)
	}
}
