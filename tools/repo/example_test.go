package repo_test

import (
	"context"
	"fmt"
	"log"
	"os"
	"path/filepath"

	"troupe/tools"
	"troupe/tools/repo"
	"troupe/workspace"
)

// Example builds the repo tools for a workspace, registers them and calls
// repo.readFile the way troupe does: look the tool up, validate the
// arguments against its input schema, then call it.
func Example() {
	dir, err := os.MkdirTemp("", "repo-example")
	if err != nil {
		log.Fatal(err)
	}
	defer os.RemoveAll(dir)
	if err := os.WriteFile(filepath.Join(dir, "hello.txt"), []byte("Hello, troupe!\n"), 0o644); err != nil {
		log.Fatal(err)
	}

	ws, err := workspace.Open(dir)
	if err != nil {
		log.Fatal(err)
	}
	defer ws.Close()
	reg, err := tools.NewRegistry(repo.Tools(ws, repo.Options{})...)
	if err != nil {
		log.Fatal(err)
	}

	entry, _ := reg.Lookup(repo.NameReadFile)
	args, err := entry.Validate([]byte(`{"path": "hello.txt"}`))
	if err != nil {
		log.Fatal(err)
	}
	res, err := entry.Tool.Call(context.Background(), &tools.Request{Arguments: args})
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println(res.Content[0].Text)

	// A path outside the workspace is an error the model sees.
	_, err = entry.Tool.Call(context.Background(), &tools.Request{Arguments: []byte(`{"path": "../secret"}`)})
	fmt.Println(err)

	// Output:
	// {"path":"hello.txt","size":15,"offset":0,"truncated":false,"content":"Hello, troupe!\n"}
	// permission_denied: path "../secret" is outside the workspace; only paths inside it can be used
}
