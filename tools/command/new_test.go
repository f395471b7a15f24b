package command_test

import (
	"encoding/json"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	"troupe/protocol"
	"troupe/tools"
	"troupe/tools/command"
)

// New refuses bad definitions with an error naming the tool and the
// problem.
func TestNewRejectsBadDefinitions(t *testing.T) {
	t.Parallel()
	ws := t.TempDir()
	outside := t.TempDir()
	must(t, os.Symlink(outside, filepath.Join(ws, "link-out")))
	writeFile(t, ws, "file.txt", "x", 0o644)
	notExec := writeFile(t, outside, "data", "x", 0o644)
	schema := json.RawMessage(`{"type":"object","properties":{"file":{"type":"string"},"files":{"type":"array"},"either":{"type":["string","array"]}}}`)
	ok := func() command.Definition {
		return command.Definition{Name: "lint", Command: "echo", InputSchema: schema}
	}
	for _, c := range []struct {
		name   string
		change func(*command.Definition)
		want   string
	}{
		{"empty name", func(d *command.Definition) { d.Name = "" }, `command tool: name "" must be 1 to 128 characters`},
		{"bad name", func(d *command.Definition) { d.Name = "lint it" }, `command tool "lint it": name "lint it": character ' '`},
		{"long name", func(d *command.Definition) { d.Name = strings.Repeat("x", 129) }, "must be 1 to 128 characters"},
		{"no command", func(d *command.Definition) { d.Command = "" }, `command tool "lint": command is empty`},
		{"relative command", func(d *command.Definition) { d.Command = "bin/lint" }, `command "bin/lint" must be an absolute path or a program name`},
		{"missing program", func(d *command.Definition) { d.Command = "troupe-no-such-program" }, `command "troupe-no-such-program": not found on PATH`},
		{"missing path", func(d *command.Definition) { d.Command = "/nonexistent/lint" }, `command "/nonexistent/lint": no such file`},
		{"directory", func(d *command.Definition) { d.Command = outside }, "not a regular file"},
		{"not executable", func(d *command.Definition) { d.Command = notExec }, "permission denied"},
		{"PATH from tool env", func(d *command.Definition) { d.Env = map[string]string{"PATH": outside} }, `command "echo": not found on PATH`},
		{"unknown placeholder", func(d *command.Definition) { d.Args = []string{"{path}"} }, `argument "{path}": placeholder {path} is not a property of the input schema`},
		{"no schema, placeholder", func(d *command.Definition) { d.InputSchema = nil; d.Args = []string{"{file}"} }, "placeholder {file} is not a property"},
		{"unclosed brace", func(d *command.Definition) { d.Args = []string{"{file"} }, `"{" is not closed`},
		{"stray closing brace", func(d *command.Definition) { d.Args = []string{"a}b"} }, `"}" closes nothing`},
		{"empty placeholder", func(d *command.Definition) { d.Args = []string{"x{}"} }, `"{}" names no argument`},
		{"bad placeholder name", func(d *command.Definition) { d.Args = []string{"{a b}"} }, "placeholder {a b}: character ' '"},
		{"array in part", func(d *command.Definition) { d.Args = []string{"--f={files}"} }, "{files} can be an array"},
		{"maybe array in part", func(d *command.Definition) { d.Args = []string{"{either}.txt"} }, "{either} can be an array"},
		{"schema not JSON", func(d *command.Definition) { d.InputSchema = json.RawMessage(`{`) }, "input schema is not JSON"},
		{"schema not object", func(d *command.Definition) { d.InputSchema = json.RawMessage(`{"type":"string"}`) }, `input schema must have type "object"`},
		{"schema does not compile", func(d *command.Definition) {
			d.InputSchema = json.RawMessage(`{"type":"object","properties":{"a":{"type":"nope"}}}`)
		}, "input schema does not compile"},
		{"output schema", func(d *command.Definition) { d.OutputSchema = json.RawMessage(`{"type":"array"}`) }, `output schema must have type "object"`},
		{"negative timeout", func(d *command.Definition) { d.Timeout = -time.Second }, "must not be negative"},
		{"env name", func(d *command.Definition) { d.Env = map[string]string{"A=B": "x"} }, `env: environment variable name "A=B" is not valid`},
		{"env value", func(d *command.Definition) { d.Env = map[string]string{"A": "x\x00"} }, "env: environment variable A contains a NUL"},
		{"cwd escapes", func(d *command.Definition) { d.Cwd = "../x" }, `cwd "../x" is outside the workspace`},
		{"cwd absolute outside", func(d *command.Definition) { d.Cwd = outside }, "outside the workspace"},
		{"cwd through a symlink", func(d *command.Definition) { d.Cwd = "link-out" }, `cwd "link-out" is outside the workspace`},
		{"cwd a file", func(d *command.Definition) { d.Cwd = "file.txt" }, "not a directory"},
	} {
		d := ok()
		c.change(&d)
		_, err := command.New(d, ws)
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: got %v, want an error with %q", c.name, err, c.want)
		}
	}
	if _, err := command.New(ok(), filepath.Join(ws, "missing")); err == nil || !strings.Contains(err.Error(), `command tool "lint": workspace `) {
		t.Errorf("missing workspace: %v", err)
	}
	if _, err := command.New(ok(), filepath.Join(ws, "file.txt")); err == nil || !strings.Contains(err.Error(), "not a directory") {
		t.Errorf("file as workspace: %v", err)
	}
	// The good one, for contrast; a cwd that does not exist yet is fine.
	d := ok()
	d.Cwd = "build"
	d.Args = []string{"{{literal}}", "{file}", "{files}", "--file={file}", "{either}"}
	if _, err := command.New(d, ws); err != nil {
		t.Fatal(err)
	}
}

// The Spec: schemas, annotations from the side effects, and _meta.
func TestSpec(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		name              string
		def               command.Definition
		destructive, open bool
		meta              map[string]any
	}{
		{"defaults", command.Definition{Name: "a", Command: "true", SandboxProfile: "default"}, false, false, map[string]any{
			"requires_approval": false, "high_risk": false, "sandbox_profile": "default", "allow_network": false,
			"default_timeout_ms": int64(120000), "allows_streaming": false, "side_effects": []string{},
			"command": []string{"true"},
		}},
		{"everything", command.Definition{
			Name: "b", DisplayName: "Bee", Description: "Does b.", Command: "true",
			SideEffects: []string{"filesystem"}, Version: "1.2.0", RequiresApproval: true,
			SandboxProfile: "seatbelt", AllowNetwork: true, Timeout: 1500 * time.Millisecond, Streaming: true,
		}, true, true, map[string]any{
			"requires_approval": true, "high_risk": true, "sandbox_profile": "seatbelt", "allow_network": true,
			"default_timeout_ms": int64(1500), "allows_streaming": true, "side_effects": []string{"filesystem"},
			"version": "1.2.0", "command": []string{"true"},
		}},
		{"network side effect", command.Definition{Name: "c", Command: "true", SideEffects: []string{"network"}}, true, true, nil},
	} {
		spec := newTool(t, c.def, "").Spec()
		a := spec.Annotations
		if a == nil || *a.ReadOnlyHint || *a.DestructiveHint != c.destructive || *a.OpenWorldHint != c.open || a.IdempotentHint != nil {
			t.Errorf("%s: annotations %+v", c.name, a)
		}
		if c.meta == nil {
			continue
		}
		want := map[string]any{}
		for k, v := range c.meta {
			want[protocol.MetaPrefix+k] = v
		}
		reg, err := tools.NewRegistry(newTool(t, c.def, ""))
		if err != nil {
			t.Fatal(err)
		}
		listed, _ := reg.Page(0, 1)
		if !reflect.DeepEqual(listed[0].Meta, want) {
			t.Errorf("%s: meta %v, want %v", c.name, listed[0].Meta, want)
		}
		if spec.Name != c.def.Name || spec.Title != c.def.DisplayName || a.Title != c.def.DisplayName || spec.Description != c.def.Description {
			t.Errorf("%s: spec %+v", c.name, spec)
		}
	}

	// No input schema: only {} is accepted.
	spec := newTool(t, command.Definition{Name: "d", Command: "true"}, "").Spec()
	if string(spec.InputSchema) != `{"type":"object","additionalProperties":false}` || spec.OutputSchema != nil {
		t.Errorf("schemas %s %s", spec.InputSchema, spec.OutputSchema)
	}
	reg, err := tools.NewRegistry(newTool(t, command.Definition{Name: "d", Command: "true"}, ""))
	if err != nil {
		t.Fatal(err)
	}
	e, _ := reg.Lookup("d")
	if _, err := e.Validate([]byte(`{"x":1}`)); err == nil {
		t.Error("an argument was accepted by a tool that declares none")
	}
}
