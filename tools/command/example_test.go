package command_test

import (
	"context"
	"encoding/json"
	"fmt"
	"log"
	"os"

	"troupe/tools"
	"troupe/tools/command"
)

// Example builds a command tool, registers it and calls it the way troupe
// does: look the tool up, validate the arguments against its input
// schema, then call it. The argument reaches echo as one argv element;
// no shell ever sees it.
func Example() {
	workspace, err := os.MkdirTemp("", "command-example")
	if err != nil {
		log.Fatal(err)
	}
	defer os.RemoveAll(workspace)

	greet, err := command.New(command.Definition{
		Name:        "greet",
		Description: "Greets someone.",
		Command:     "echo", // looked up on PATH
		// Trusted: no process sandbox here (troupe serve gives tools one).
		SandboxProfile: "none",
		Args:           []string{"Hello,", "{name}"},
		InputSchema: json.RawMessage(`{"type":"object",
			"properties":{"name":{"type":"string"}},"required":["name"]}`),
	}, workspace)
	if err != nil {
		log.Fatal(err)
	}
	reg, err := tools.NewRegistry(greet)
	if err != nil {
		log.Fatal(err)
	}

	entry, _ := reg.Lookup("greet")
	args, err := entry.Validate([]byte(`{"name": "troupe; rm -rf ~"}`))
	if err != nil {
		log.Fatal(err)
	}
	res, err := entry.Tool.Call(context.Background(), &tools.Request{Arguments: args})
	if err != nil {
		log.Fatal(err)
	}
	fmt.Print(res.Content[0].Text)

	// Output:
	// Hello, troupe; rm -rf ~
}

// A program that fails gives the model its exit status and the end of
// its stderr.
func ExampleNew_failure() {
	workspace, err := os.MkdirTemp("", "command-example")
	if err != nil {
		log.Fatal(err)
	}
	defer os.RemoveAll(workspace)

	check, err := command.New(command.Definition{
		Name:           "check",
		Command:        "sh",
		SandboxProfile: "none",
		Args:           []string{"-c", `echo "config.toml: line 3: unknown key" >&2; exit 2`},
	}, workspace)
	if err != nil {
		log.Fatal(err)
	}
	_, err = check.Call(context.Background(), &tools.Request{Arguments: []byte(`{}`)})
	fmt.Println(err)

	// Output:
	// command_failed: check: the program exited with status 2.
	//
	// stderr:
	// config.toml: line 3: unknown key
}
