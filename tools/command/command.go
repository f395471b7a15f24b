package command

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"time"

	"github.com/santhosh-tekuri/jsonschema/v6"
	"golang.org/x/sys/unix"

	"troupe/protocol"
	"troupe/tools"
)

// DefaultTimeout is a call's time limit when Definition.Timeout is zero.
const DefaultTimeout = 120 * time.Second

// KindCommandFailed is the kind of the error a call returns when its
// program ran and exited with a status other than 0 (or died of a signal
// troupe did not send). None of the kinds in package tools fits: the
// arguments may be fine and troupe did not fail; the program said no.
const KindCommandFailed = tools.KindCommandFailed

// defaultInputSchema admits only {}: a tool that declares no arguments
// takes none.
const defaultInputSchema = `{"type":"object","additionalProperties":false}`

// Definition describes one command tool, as the configuration declares it.
type Definition struct {
	Name        string // the tool's name: 1 to 128 of A-Z a-z 0-9 _ - .
	DisplayName string // the title clients show
	Description string

	// Command is the program: an absolute path, or a name looked up on
	// the PATH of the call's environment.
	Command string
	// Args follow the program in argv. "{name}" in an element is replaced
	// by the argument of that name; see the package doc for the rules.
	Args []string
	// Cwd is the working directory: "" for the workspace root; relative
	// paths start at the workspace. It must lie inside the workspace.
	Cwd string
	// Env is the tool's environment on top of the baseline (values
	// resolved; they may be secrets).
	Env map[string]string

	// InputSchema is the arguments' JSON Schema, root type "object"; nil
	// means no arguments at all.
	InputSchema json.RawMessage
	// OutputSchema, when set, makes stdout a JSON object that must
	// validate against it; it becomes the result's structuredContent.
	OutputSchema json.RawMessage

	// Timeout limits each call (0 means DefaultTimeout); a context with an
	// earlier deadline stops the call earlier.
	Timeout time.Duration
	// KillGrace is how long the process group has between SIGTERM and
	// SIGKILL when a call is stopped (0 means DefaultKillGrace).
	KillGrace time.Duration
	// Streaming forwards output lines as progress and log notifications
	// while the program runs.
	Streaming bool

	// Carried into the Spec (annotations and _meta), not enforced here.
	SideEffects      []string // e.g. "filesystem", "network"
	Version          string
	RequiresApproval bool
	SandboxProfile   string // "" means "default"
	AllowNetwork     bool
}

// commandTool is a Definition checked and compiled.
type commandTool struct {
	def     Definition
	spec    tools.Spec
	args    []argTemplate
	output  *jsonschema.Schema // nil without an output schema
	base    map[string]string  // the baseline env, taken when the tool was built
	wsAbs   string             // the workspace as configured, made absolute
	wsReal  string             // the same with symlinks resolved
	timeout time.Duration
	grace   time.Duration
}

// New checks def and builds its tool, confined to the workspace directory.
// It fails, naming the tool and the problem, on an invalid name, a program
// that does not exist or cannot be found on PATH, a placeholder that names
// no property of the input schema, a schema that does not compile, a
// working directory outside the workspace, or an invalid env variable.
func New(def Definition, workspace string) (tools.Tool, error) {
	t, err := build(def, workspace)
	if err != nil {
		if def.Name == "" {
			return nil, fmt.Errorf("command tool: %w", err)
		}
		return nil, fmt.Errorf("command tool %q: %w", def.Name, err)
	}
	return t, nil
}

func build(def Definition, workspace string) (*commandTool, error) {
	if !supported {
		return nil, errors.New("command tools are supported on Linux only")
	}
	if err := checkName(def.Name); err != nil {
		return nil, err
	}
	t := &commandTool{def: def, base: baseEnv(), timeout: def.Timeout, grace: def.KillGrace}
	if t.timeout == 0 {
		t.timeout = DefaultTimeout
	}
	if t.grace == 0 {
		t.grace = DefaultKillGrace
	}
	if t.timeout < 0 || t.grace < 0 {
		return nil, errors.New("timeout and kill grace must not be negative")
	}

	var err error
	if t.wsAbs, t.wsReal, err = workspaceDir(workspace); err != nil {
		return nil, fmt.Errorf("workspace: %w", err)
	}
	if def.Cwd != "" {
		if _, err := resolveDir(t.wsAbs, t.wsReal, def.Cwd); errors.Is(err, errOutside) || errors.Is(err, errNotDir) {
			return nil, fmt.Errorf("cwd %q: %w", def.Cwd, err)
		}
		// A directory that does not exist yet may be created before the
		// first call; the call checks again.
	}
	if err := checkEnv(def.Env); err != nil {
		return nil, fmt.Errorf("env: %w", err)
	}

	switch {
	case def.Command == "":
		return nil, errors.New("command is empty")
	case !filepath.IsAbs(def.Command) && strings.ContainsRune(def.Command, filepath.Separator):
		return nil, fmt.Errorf("command %q must be an absolute path or a program name to look up on PATH", def.Command)
	}
	if _, err := lookProgram(def.Command, mergeEnv(t.base, def.Env)["PATH"]); err != nil {
		return nil, fmt.Errorf("command %q: %w", def.Command, programProblem(err))
	}

	input := def.InputSchema
	if input == nil {
		input = json.RawMessage(defaultInputSchema)
	}
	if _, err := compileObjectSchema(def.Name, "input", input); err != nil {
		return nil, err
	}
	var props struct {
		Properties map[string]json.RawMessage `json:"properties"`
	}
	_ = json.Unmarshal(input, &props) // it compiled, so it is a JSON object
	for _, a := range def.Args {
		tmpl, err := parseArg(a)
		if err != nil {
			return nil, err
		}
		t.args = append(t.args, tmpl)
	}
	if err := checkTemplates(t.args, props.Properties); err != nil {
		return nil, err
	}
	if def.OutputSchema != nil {
		if t.output, err = compileObjectSchema(def.Name, "output", def.OutputSchema); err != nil {
			return nil, err
		}
	}
	t.spec = makeSpec(def, input, t.timeout)
	return t, nil
}

// checkName applies the registry's naming rules (SEP-986), so a bad name
// is reported with the rest of the definition's problems.
func checkName(name string) error {
	if name == "" || len(name) > 128 {
		return fmt.Errorf("name %q must be 1 to 128 characters", name)
	}
	for _, c := range name {
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '_' || c == '-' || c == '.') {
			return fmt.Errorf("name %q: character %q is not one of A-Z a-z 0-9 _ - .", name, c)
		}
	}
	return nil
}

// compileObjectSchema compiles a schema the way tools.NewRegistry does.
func compileObjectSchema(tool, which string, raw json.RawMessage) (*jsonschema.Schema, error) {
	doc, err := jsonschema.UnmarshalJSON(bytes.NewReader(raw))
	if err != nil {
		return nil, fmt.Errorf("%s schema is not JSON: %w", which, err)
	}
	if m, ok := doc.(map[string]any); !ok || m["type"] != "object" {
		return nil, fmt.Errorf("%s schema must have type \"object\" at its root", which)
	}
	c := jsonschema.NewCompiler()
	c.DefaultDraft(jsonschema.Draft2020)
	url := "troupe:///tools/" + tool + "/" + which + ".json"
	if err := c.AddResource(url, doc); err != nil {
		return nil, fmt.Errorf("%s schema: %w", which, err)
	}
	s, err := c.Compile(url)
	if err != nil {
		return nil, fmt.Errorf("%s schema does not compile: %w", which, err)
	}
	return s, nil
}

// makeSpec describes the tool for tools/list. Annotations: never
// read-only; destructive when any side effect is declared; open-world
// when it may use the network.
func makeSpec(def Definition, input json.RawMessage, timeout time.Duration) tools.Spec {
	no := false
	destructive := len(def.SideEffects) > 0
	openWorld := def.AllowNetwork || slices.Contains(def.SideEffects, "network")
	profile := def.SandboxProfile
	if profile == "" {
		profile = "default"
	}
	meta := map[string]any{
		protocol.MetaPrefix + "requires_approval":  def.RequiresApproval,
		protocol.MetaPrefix + "sandbox_profile":    profile,
		protocol.MetaPrefix + "allow_network":      def.AllowNetwork,
		protocol.MetaPrefix + "default_timeout_ms": timeout.Milliseconds(),
		protocol.MetaPrefix + "allows_streaming":   def.Streaming,
		protocol.MetaPrefix + "side_effects":       append([]string{}, def.SideEffects...),
	}
	if def.Version != "" {
		meta[protocol.MetaPrefix+"version"] = def.Version
	}
	return tools.Spec{
		Name:         def.Name,
		Title:        def.DisplayName,
		Description:  def.Description,
		InputSchema:  input,
		OutputSchema: def.OutputSchema,
		Annotations: &protocol.ToolAnnotations{
			Title:           def.DisplayName,
			ReadOnlyHint:    &no,
			DestructiveHint: &destructive,
			OpenWorldHint:   &openWorld,
		},
		Meta: meta,
	}
}

// Spec implements tools.Tool.
func (t *commandTool) Spec() tools.Spec { return t.spec }

// Call implements tools.Tool: it runs the program once (see the package
// doc for what goes in and what comes out).
func (t *commandTool) Call(ctx context.Context, req *tools.Request) (*protocol.CallToolResult, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	name := t.def.Name
	raw := req.Arguments
	if len(bytes.TrimSpace(raw)) == 0 {
		raw = json.RawMessage("{}")
	}
	var values map[string]json.RawMessage
	if err := json.Unmarshal(raw, &values); err != nil {
		return nil, tools.Errorf(tools.KindInvalidArgument, "arguments for %s must be a JSON object", name)
	}
	argv, err := expandArgs(t.args, values)
	if err != nil {
		return nil, err
	}

	var over tools.Overrides
	if req.Overrides != nil {
		over = *req.Overrides
	}
	if err := checkEnv(over.Env); err != nil {
		return nil, tools.Errorf(tools.KindInvalidArgument, "%s: the session's %v", name, err)
	}
	env := mergeEnv(t.base, t.def.Env, over.Env)
	dir, err := t.workDir(over.Cwd)
	if err != nil {
		return nil, err
	}
	path, err := lookProgram(t.def.Command, env["PATH"])
	if err != nil {
		return nil, tools.Errorf(tools.KindInternal, "%s: command %q cannot be run: %v", name, t.def.Command, programProblem(err))
	}

	redact := func(s string) string { return s }
	if r := redactor(t.def.Env, over.Env); r != nil {
		redact = r.Replace
	}
	r := &run{
		path: path, argv: append([]string{t.def.Command}, argv...), dir: dir, env: environ(env),
		stdin: raw, timeout: t.timeout, grace: t.grace,
	}
	if t.def.Streaming && req.Reporter != nil {
		r.stream = newStreamer(req, name, redact)
	}
	res, err := r.exec(ctx)
	if r.stream != nil {
		r.stream.close()
	}
	if ctxErr := ctx.Err(); ctxErr != nil {
		return nil, ctxErr
	}
	var se *startError
	if errors.As(err, &se) {
		return nil, tools.Errorf(tools.KindInternal, "%s: command %q could not be started: %v", name, t.def.Command, programProblem(se.err))
	}
	if err != nil {
		return nil, fmt.Errorf("%s: %w", name, err)
	}
	return t.result(res, redact)
}

// workDir picks and checks the call's working directory: the session's,
// else the configured one, else the workspace root.
func (t *commandTool) workDir(sessionCwd string) (string, error) {
	p, from := sessionCwd, "set by the session"
	if p == "" {
		p, from = t.def.Cwd, "configured"
	}
	if p == "" {
		return t.wsReal, nil
	}
	dir, err := resolveDir(t.wsAbs, t.wsReal, p)
	if err != nil {
		return "", dirError(t.def.Name, p, from, err)
	}
	return dir, nil
}

// programProblem says in words why a program cannot be run, without the
// host paths the underlying error may carry.
func programProblem(err error) error {
	switch {
	case errors.Is(err, errNoProgram):
		return errors.New("not found on PATH")
	case errors.Is(err, fs.ErrNotExist):
		return errors.New("no such file")
	case errors.Is(err, errNotRegular):
		return errors.New("not a regular file")
	case errors.Is(err, fs.ErrPermission):
		return errors.New("permission denied (is it executable?)")
	case errors.Is(err, syscall.ENOEXEC):
		return errors.New("not a program this system can run (exec format error)")
	}
	var errno syscall.Errno
	if errors.As(err, &errno) {
		return errno
	}
	return errors.New("unexpected failure; see the server log")
}

// result maps a finished run to what the client gets.
func (t *commandTool) result(res *runResult, redact func(string) string) (*protocol.CallToolResult, error) {
	name := t.def.Name
	if res.stopped {
		return nil, &tools.Error{Kind: tools.KindDeadlineExceeded, Message: fmt.Sprintf(
			"%s did not finish within %s and was stopped.%s", name, t.timeout, excerpts(res, redact))}
	}
	if ws, ok := res.state.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
		return nil, &tools.Error{Kind: KindCommandFailed, Message: fmt.Sprintf(
			"%s: the program was killed by signal %s (%s).%s", name, unix.SignalName(ws.Signal()), ws.Signal(), excerpts(res, redact))}
	}
	if code := res.state.ExitCode(); code != 0 {
		return nil, &tools.Error{Kind: KindCommandFailed, Message: fmt.Sprintf(
			"%s: the program exited with status %d.%s", name, code, excerpts(res, redact))}
	}

	stdout := redact(res.stdout.text())
	out := &protocol.CallToolResult{
		Content: []protocol.Content{protocol.TextContent(stdout)},
		Meta: map[string]any{protocol.MetaPrefix + "process": map[string]any{
			"exitCode":        0,
			"stdoutBytes":     res.stdout.total,
			"stderrBytes":     res.stderr.total,
			"stdoutTruncated": res.stdout.truncated(),
			"durationMs":      res.duration.Milliseconds(),
		}},
	}
	if t.output == nil {
		return out, nil
	}
	structured, err := t.structured(res, stdout)
	if err != nil {
		return nil, err
	}
	out.StructuredContent = structured
	return out, nil
}

// structured checks stdout against the output schema. A program whose
// output breaks its declared contract is a fault of the tool, not of the
// call's arguments, so the error is internal (with the violations, which
// is what the operator needs to fix the program or the schema).
func (t *commandTool) structured(res *runResult, stdout string) (json.RawMessage, error) {
	name := t.def.Name
	if res.stdout.truncated() {
		return nil, tools.Errorf(tools.KindInternal,
			"%s: the output (%d bytes) is too large to check against the tool's output schema (limit %d bytes)",
			name, res.stdout.total, MaxOutputBytes)
	}
	doc, err := jsonschema.UnmarshalJSON(strings.NewReader(stdout))
	if _, isObject := doc.(map[string]any); err != nil || !isObject {
		return nil, tools.Errorf(tools.KindInternal,
			"%s: the output is not a JSON object, as the tool's output schema requires. Output:\n%s",
			name, res.stdout.last(stdoutExcerptBytes))
	}
	if err := t.output.Validate(doc); err != nil {
		return nil, tools.Errorf(tools.KindInternal,
			"%s: the output does not match the tool's output schema:\n%s", name, violations(err))
	}
	var b bytes.Buffer
	if err := json.Compact(&b, []byte(stdout)); err != nil {
		return nil, tools.Errorf(tools.KindInternal, "%s: the output is not valid JSON", name)
	}
	return json.RawMessage(b.Bytes()), nil
}

// violations lists a validation error's leaf problems with their
// locations, one a line.
func violations(err error) string {
	ve, ok := err.(*jsonschema.ValidationError)
	if !ok {
		return "  - " + err.Error()
	}
	var lines []string
	for _, u := range ve.BasicOutput().Errors {
		if u.Error == nil || strings.HasPrefix(u.Error.String(), "validation failed") {
			continue
		}
		loc := u.InstanceLocation
		if loc == "" {
			loc = "(root)"
		}
		if line := "  - at " + loc + ": " + u.Error.String(); !slices.Contains(lines, line) {
			lines = append(lines, line)
		}
	}
	if len(lines) == 0 {
		return "  - " + ve.Error()
	}
	return strings.Join(lines, "\n")
}

// excerpts is the end of stdout and stderr, for an error message.
func excerpts(res *runResult, redact func(string) string) string {
	var b strings.Builder
	for _, o := range []struct {
		name string
		c    *capture
		n    int
	}{{"stdout", res.stdout, stdoutExcerptBytes}, {"stderr", res.stderr, stderrExcerptBytes}} {
		switch {
		case o.c.total == 0:
			continue
		case o.c.total <= int64(o.n):
			fmt.Fprintf(&b, "\n\n%s:\n", o.name)
		default:
			fmt.Fprintf(&b, "\n\n%s (the last %d of %d bytes):\n", o.name, o.n, o.c.total)
		}
		b.WriteString(redact(o.c.last(o.n)))
	}
	if b.Len() == 0 {
		return " It wrote no output."
	}
	return b.String()
}
