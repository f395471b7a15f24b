package tools_test

import (
	"testing"

	"troupe/tools"
	"troupe/tools/benchmark"
	"troupe/tools/command"
	"troupe/tools/docs"
	"troupe/tools/files"
	"troupe/tools/repo"
	"troupe/workspace"
)

// TestFixedSchemasCompile is the promise SchemasFixed makes: the registry
// compiles these schemas only at a tool's first call, so every first-party
// tool's schemas must compile here, where a mistake fails a test.
func TestFixedSchemasCompile(t *testing.T) {
	ws, err := workspace.Open(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	all := append(repo.Tools(ws, repo.Options{}), files.Tools(ws)...)
	fetch, err := docs.Tool(docs.Options{})
	if err != nil {
		t.Fatal(err)
	}
	shell, err := command.Shell(command.ShellOptions{Workspace: ws.Dir(), SandboxProfile: "none"})
	if err != nil {
		t.Fatal(err)
	}
	all = append(all, fetch, shell, benchmark.Echo())
	for _, tl := range all {
		spec := tl.Spec()
		if !spec.SchemasFixed {
			t.Errorf("%s: a first-party tool without SchemasFixed", spec.Name)
		}
		if err := tools.CheckSchemas(spec); err != nil {
			t.Errorf("%s: %v", spec.Name, err)
		}
	}
}
