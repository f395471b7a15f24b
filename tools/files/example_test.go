package files_test

import (
	"context"
	"fmt"
	"log"
	"os"
	"path/filepath"

	"troupe/tools"
	"troupe/tools/files"
	"troupe/workspace"
)

// Example registers fs.writeFile and calls it the way troupe does: look
// the tool up, validate the arguments against its input schema, then call
// it. (In troupe a person approves the call first: the tool is high-risk.)
func Example() {
	dir, err := os.MkdirTemp("", "files-example")
	if err != nil {
		log.Fatal(err)
	}
	defer os.RemoveAll(dir)
	ws, err := workspace.Open(dir)
	if err != nil {
		log.Fatal(err)
	}
	defer ws.Close()
	reg, err := tools.NewRegistry(files.Tools(ws)...)
	if err != nil {
		log.Fatal(err)
	}
	entry, _ := reg.Lookup(files.NameWriteFile)
	call := func(args string) {
		valid, err := entry.Validate([]byte(args))
		if err != nil {
			fmt.Println(err)
			return
		}
		res, err := entry.Tool.Call(context.Background(), &tools.Request{Arguments: valid})
		if err != nil {
			fmt.Println(err)
			return
		}
		fmt.Println(res.Content[0].Text)
	}

	// A missing directory is an error that says how to proceed.
	call(`{"path": "notes/hello.txt", "content": "Hello, troupe!\n"}`)
	call(`{"path": "notes/hello.txt", "content": "Hello, troupe!\n", "createDirs": true}`)
	b, _ := os.ReadFile(filepath.Join(dir, "notes", "hello.txt"))
	fmt.Printf("%q\n", b)

	// Paths outside the workspace and symlinks are refused.
	call(`{"path": "../elsewhere.txt", "content": "x"}`)
	os.Symlink("notes/hello.txt", filepath.Join(dir, "link"))
	call(`{"path": "link", "content": "x"}`)

	// Output:
	// not_found: path "notes/hello.txt" cannot be written: directory "notes" does not exist; pass "createDirs": true to create missing directories
	// {"path":"notes/hello.txt","bytesWritten":15}
	// "Hello, troupe!\n"
	// permission_denied: path "../elsewhere.txt" is outside the workspace; only paths inside it can be written
	// permission_denied: path "link" is a symbolic link; fs.writeFile never writes through symbolic links, so name the file by its real path in the workspace
}
