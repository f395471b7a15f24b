package tools_test

import (
	"context"
	"encoding/json"
	"fmt"

	"troupe/protocol"
	"troupe/tools"
)

type greet struct{}

func (greet) Spec() tools.Spec {
	return tools.Spec{
		Name:        "greet",
		Description: "Greets someone.",
		InputSchema: json.RawMessage(`{"type":"object","properties":{"name":{"type":"string"}},"required":["name"]}`),
	}
}

func (greet) Call(_ context.Context, req *tools.Request) (*protocol.CallToolResult, error) {
	var args struct{ Name string }
	if err := json.Unmarshal(req.Arguments, &args); err != nil {
		return nil, err
	}
	return tools.StructuredResult(map[string]string{"greeting": "hello, " + args.Name})
}

// A registry validates arguments against a tool's input schema before the
// tool runs; troupe's invocation actor does exactly this for every call.
func ExampleRegistry() {
	reg, err := tools.NewRegistry(greet{})
	if err != nil {
		panic(err)
	}
	entry, _ := reg.Lookup("greet")

	if _, err := entry.Check(json.RawMessage(`{"name": 7}`)); err != nil {
		fmt.Println(err)
	}
	// Check parses the arguments once: the text goes to the tool, the
	// decoded value to the gate's hash (gate.Call.Decoded).
	args, _ := entry.Check(json.RawMessage(`{"name": "Ada"}`))
	fmt.Println(args.Value["name"])
	res, _ := entry.Tool.Call(context.Background(), &tools.Request{Arguments: args.Raw})
	fmt.Println(res.Content[0].Text)
	// Output:
	// invalid_argument: invalid arguments for greet:
	//   - at /name: got number, want string
	// Ada
	// {"greeting":"hello, Ada"}
}
