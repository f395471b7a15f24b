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
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/santhosh-tekuri/jsonschema/v6"
	"golang.org/x/sys/unix"

	"troupe/protocol"
	"troupe/redact"
	"troupe/sandbox"
	"troupe/spool"
	"troupe/tools"
	"troupe/workspace"
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
	// MissingVars name the environment variables Env and Args refer to
	// ("${NAME}" in the config) that are unset or empty: the tool is
	// built all the same, and each call fails as unauthenticated naming
	// them, before anything runs or anyone is asked to approve it.
	MissingVars []string

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

	// SideEffects are declared hints ("filesystem", "network"): shown to
	// clients and people; a tool declaring either is high-risk, so every
	// call needs a person's approval.
	SideEffects []string
	Version     string
	// RequiresApproval makes each call ask a person first (troupe's gate
	// enforces it; see tools.Safety).
	RequiresApproval bool
	// SandboxProfile is how the program is isolated: "" or "default",
	// "seatbelt" (the same on Linux) or "none" (trusted).
	SandboxProfile string
	// AllowNetwork lets the sandboxed program use the network (and makes
	// the tool high-risk).
	AllowNetwork bool
	// Sandbox starts the programs of every profile but "none"; without
	// it such a tool refuses to run (fail closed).
	Sandbox *sandbox.Sandbox
	// Limits are the resource limits of a sandboxed run.
	Limits sandbox.Limits
}

// commandTool is a Definition checked and compiled.
type commandTool struct {
	def     Definition
	spec    tools.Spec
	args    []argTemplate
	output  *jsonschema.Schema // nil without an output schema
	base    map[string]string  // the baseline env, taken when the tool was built
	ws      workspace.Dirs     // every working directory lies in it
	timeout time.Duration
	grace   time.Duration
	profile sandbox.Profile
}

// New checks def and builds its tool, confined to the workspace directory.
// It fails, naming the tool and the problem, on an invalid name, a program
// that does not exist or cannot be found on PATH, a placeholder that names
// no property of the input schema, a schema that does not compile, a
// working directory outside the workspace, or an invalid env variable.
func New(def Definition, dir string) (tools.Tool, error) {
	t, err := build(def, dir)
	if err != nil {
		if def.Name == "" {
			return nil, fmt.Errorf("command tool: %w", err)
		}
		return nil, fmt.Errorf("command tool %q: %w", def.Name, err)
	}
	return t, nil
}

func build(def Definition, dir string) (*commandTool, error) {
	if !supported {
		return nil, errors.New("command tools are supported on Linux only")
	}
	if err := checkName(def.Name); err != nil {
		return nil, err
	}
	profile, err := sandbox.ParseProfile(def.SandboxProfile)
	if err != nil {
		return nil, err
	}
	t := &commandTool{def: def, base: baseEnv(), timeout: def.Timeout, grace: def.KillGrace, profile: profile}
	if t.timeout == 0 {
		t.timeout = DefaultTimeout
	}
	if t.grace == 0 {
		t.grace = DefaultKillGrace
	}
	if t.timeout < 0 || t.grace < 0 {
		return nil, errors.New("timeout and kill grace must not be negative")
	}

	if t.ws, err = workspace.ResolveDirs(dir); err != nil {
		return nil, err
	}
	if def.Cwd != "" {
		if _, err := t.ws.WorkDir(def.Cwd); workspace.IsOutside(err) || errors.Is(err, workspace.ErrNotDir) || errors.Is(err, workspace.ErrInvalidPath) {
			_, reason := workspace.DirProblem(err)
			return nil, fmt.Errorf("cwd %q %s", def.Cwd, reason)
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
	t.spec = makeSpec(def, input, t.timeout, profile)
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
func makeSpec(def Definition, input json.RawMessage, timeout time.Duration, profile sandbox.Profile) tools.Spec {
	no := false
	destructive := len(def.SideEffects) > 0
	openWorld := def.AllowNetwork || slices.Contains(def.SideEffects, "network")
	// The argv template is shown so people see what a call runs before
	// approving it; it is also what makes a changed command a different
	// tool for session trust (tools.Entry.Fingerprint).
	meta := map[string]any{tools.MetaCommand: append([]string{def.Command}, def.Args...)}
	if def.Version != "" {
		meta[tools.MetaVersion] = def.Version
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
		Safety: tools.Safety{
			RequiresApproval: def.RequiresApproval,
			HighRisk:         HighRisk(def.SideEffects, def.AllowNetwork),
			SandboxProfile:   string(profile),
			AllowNetwork:     def.AllowNetwork,
			SideEffects:      append([]string{}, def.SideEffects...),
			Timeout:          timeout,
			Streaming:        def.Streaming,
		},
	}
}

// HighRisk reports whether a tool with these declarations writes files or
// reaches the network, which makes every call need a person's approval.
func HighRisk(sideEffects []string, allowNetwork bool) bool {
	return allowNetwork || slices.Contains(sideEffects, "filesystem") || slices.Contains(sideEffects, "network")
}

// Spec implements tools.Tool.
func (t *commandTool) Spec() tools.Spec { return t.spec }

// prepared is one call resolved: what will run, where, with what.
type prepared struct {
	raw     json.RawMessage // the arguments, for stdin
	argv    []string        // after the program
	dir     string          // host path
	env     map[string]string
	session map[string]string // the session's own env overrides
}

// prepare resolves a call's argv, working directory and environment.
func (t *commandTool) prepare(req *tools.Request) (*prepared, error) {
	name := t.def.Name
	if vars := t.def.MissingVars; len(vars) > 0 {
		plural := "variable"
		if len(vars) > 1 {
			plural = "variables"
		}
		return nil, tools.Errorf(tools.KindUnauthenticated,
			"%s needs a credential troupe does not have: set the environment %s %s (unset or empty) in troupe's environment",
			name, plural, strings.Join(vars, ", "))
	}
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
	dir, err := t.workDir(over.Cwd)
	if err != nil {
		return nil, err
	}
	return &prepared{raw: raw, argv: argv, dir: dir, env: mergeEnv(t.base, t.def.Env, over.Env), session: over.Env}, nil
}

// Preview implements tools.Previewer: the argv, the workspace-relative
// working directory and the variables the call sets.
func (t *commandTool) Preview(req *tools.Request) (*tools.Preview, error) {
	p, err := t.prepare(req)
	if err != nil {
		return nil, err
	}
	return &tools.Preview{Cwd: t.ws.RelOf(p.dir), Env: mergeEnv(t.def.Env, p.session),
		Command: append([]string{t.def.Command}, p.argv...)}, nil
}

// Call implements tools.Tool: it runs the program once (see the package
// doc for what goes in and what comes out).
func (t *commandTool) Call(ctx context.Context, req *tools.Request) (*protocol.CallToolResult, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	p, err := t.prepare(req)
	if err != nil {
		return nil, err
	}
	return execute(ctx, req, execution{
		tool: t.def.Name, command: t.def.Command, argv: p.argv, dir: p.dir, env: p.env,
		secretEnv: []map[string]string{t.def.Env, p.session}, stdin: p.raw,
		timeout: t.timeout, grace: t.grace, streaming: t.def.Streaming,
		sandbox: t.def.Sandbox, policy: sandbox.Policy{Profile: t.profile, Workspace: t.ws.Dir(),
			AllowNetwork: t.def.AllowNetwork, Limits: t.def.Limits},
		finish: func(res *runResult, out *spool.Output, redact func(string) string) (*protocol.CallToolResult, error) {
			return t.result(res, out, redact)
		},
	})
}

// execution is one program run as a tool call: everything execute needs,
// from command tools and shell.exec alike.
type execution struct {
	tool      string
	command   string // as configured or given: a path or a name on PATH
	argv      []string
	dir       string
	env       map[string]string
	secretEnv []map[string]string // env layers whose secret-named values are masked
	stdin     []byte
	timeout   time.Duration
	grace     time.Duration
	streaming bool
	sandbox   *sandbox.Sandbox
	policy    sandbox.Policy
	// finish maps a run that ended (not stopped) to the result.
	finish func(res *runResult, out *spool.Output, redact func(string) string) (*protocol.CallToolResult, error)
}

// execute runs e under its sandbox profile, with output going to the
// call's spool, and maps what happened to a result or a tools.Error.
func execute(ctx context.Context, req *tools.Request, e execution) (*protocol.CallToolResult, error) {
	if e.policy.Profile != sandbox.ProfileNone {
		if e.sandbox == nil {
			return nil, tools.Errorf(tools.KindUnavailable,
				"%s cannot run: its sandbox profile %q needs troupe's process sandbox, which this server was started without",
				e.tool, e.policy.Profile)
		}
		if err := e.sandbox.Check(e.policy); err != nil {
			// Fail closed: a profile this machine cannot enforce is a
			// refusal, never a run with less isolation.
			return nil, unenforceable(e.tool, err)
		}
	}
	path, err := lookProgram(e.command, e.env["PATH"])
	if err != nil {
		return nil, tools.Errorf(tools.KindInternal, "%s: command %q cannot be run: %v", e.tool, e.command, programProblem(err))
	}
	out := req.Output
	if out == nil {
		out = spool.NewOutput(spool.Limits{InlineBytes: MaxOutputBytes / 2})
	}
	var values []string
	for _, layer := range e.secretEnv {
		values = append(values, redact.EnvValues(layer)...)
	}
	masker := req.Secrets.With(values...)
	stdout, stderr := masker.Writer(out.Stdout), masker.Writer(out.Stderr)
	r := &run{
		path: path, argv: append([]string{e.command}, e.argv...), dir: e.dir, env: environ(e.env),
		stdin: e.stdin, timeout: e.timeout, grace: e.grace, stdout: stdout, stderr: stderr,
		sandbox: e.sandbox, policy: e.policy,
	}
	if e.policy.Profile == sandbox.ProfileNone {
		r.sandbox = nil
	}
	if e.streaming && req.WantsProgress && req.Reporter != nil {
		r.stream = newStreamer(ctx, req, e.tool, masker.Replace)
	}
	res, err := r.exec(ctx)
	if r.stream != nil {
		r.stream.close()
	}
	stdout.Close()
	stderr.Close()
	if ctxErr := ctx.Err(); ctxErr != nil {
		return nil, ctxErr
	}
	if err != nil {
		return nil, startFailure(e.tool, e.command, err)
	}
	if ws, ok := res.state.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
		out.SetExitStatus(128 + int(ws.Signal()))
	} else if res.state != nil {
		out.SetExitStatus(res.state.ExitCode())
	}
	if res.stopped {
		return nil, &tools.Error{Kind: tools.KindDeadlineExceeded, Message: fmt.Sprintf(
			"%s did not finish within %s and was stopped.%s", e.tool, e.timeout, excerpts(out))}
	}
	if e.policy.Profile != sandbox.ProfileNone && killedBy(res, syscall.SIGSYS) {
		// Only the seccomp filter's kill ends a confined program with
		// SIGSYS (its other refusals return EPERM or ENOSYS): troupe knows
		// for certain that policy refused it, so it says so as a refusal.
		return nil, &tools.Error{Kind: tools.KindPermissionDenied, Message: fmt.Sprintf(
			"%s: the sandbox (profile %q) killed the program: it made a system call in another architecture's "+
				"convention (such as 32-bit int 0x80 on x86-64), which the sandbox's system-call filter refuses outright. "+
				"That is policy, not a fault; the program cannot run under this profile, and only %s would let it.%s",
			e.tool, e.policy.Profile, settingFor(e.tool, `sandbox_profile = "none"`), excerpts(out))}
	}
	result, err := e.finish(res, out, masker.Replace)
	if hint := sandboxHint(e.tool, e.policy, out); hint != "" {
		if te, ok := tools.AsError(err); ok {
			te.Message += "\n\n" + hint
		} else if result != nil {
			if result.Meta == nil {
				result.Meta = map[string]any{}
			}
			result.Meta[tools.MetaSandboxHint] = hint
			addNote(result, hint)
		}
	}
	return result, err
}

// killedBy reports whether the run ended by signal sig.
func killedBy(res *runResult, sig syscall.Signal) bool {
	ws, ok := res.state.Sys().(syscall.WaitStatus)
	return ok && ws.Signaled() && ws.Signal() == sig
}

// settingFor names where the operator sets what for tool: shell.exec's
// [shell] table, a command tool's own [mcp."<name>"] table.
func settingFor(tool, what string) string {
	if tool == NameShell {
		return what + " in the [shell] table of troupe's config"
	}
	return fmt.Sprintf("%s in its [mcp.%s] table of troupe's config", what, strconv.Quote(tool))
}

// addNote puts note into a result's text, after the output, where every
// client shows it to the model: _meta, where the hint also is, is not
// shown by clients such as Codex. A structured result (shell.exec's) gets
// it as a "sandbox_note" member, in its structuredContent and in the text
// that repeats it, since Codex passes only the structured form on.
func addNote(result *protocol.CallToolResult, note string) {
	if raw, ok := result.StructuredContent.(json.RawMessage); ok && len(raw) > 0 {
		var fields map[string]json.RawMessage
		if json.Unmarshal(raw, &fields) == nil && fields != nil {
			fields[noteField], _ = json.Marshal(note)
			if b, err := json.Marshal(fields); err == nil {
				old := string(raw)
				result.StructuredContent = json.RawMessage(b)
				for i, c := range result.Content {
					if c.Type == "text" && c.Text == old {
						result.Content[i] = protocol.TextContent(string(b))
					}
				}
				return
			}
		}
	}
	result.Content = append(result.Content, protocol.TextContent(note))
}

// noteField is the member of a structured result that carries the
// sandbox's note (shell.exec's output schema declares it).
const noteField = "sandbox_note"

// sandboxHint explains a failure that looks like the sandbox saying no
// (a denied write, no network) so the model, or the person reading,
// knows it was policy, not a bug; "" when nothing suggests it.
func sandboxHint(tool string, p sandbox.Policy, out *spool.Output) string {
	if p.Profile == sandbox.ProfileNone {
		return ""
	}
	code := out.ExitStatus()
	if code == nil || *code == 0 {
		return ""
	}
	tail := out.Stderr.Last(stderrExcerptBytes)
	denied := strings.Contains(tail, "Permission denied") || strings.Contains(tail, "Read-only file system") ||
		strings.Contains(tail, "Operation not permitted")
	offline := !p.AllowNetwork && (strings.Contains(tail, "Network is unreachable") ||
		strings.Contains(tail, "Operation not permitted") || strings.Contains(tail, "Could not resolve") ||
		strings.Contains(tail, "Temporary failure in name resolution"))
	var parts []string
	if denied {
		parts = append(parts, "writes are allowed only inside the workspace and the private temp dir ($TMPDIR)")
	}
	if offline {
		parts = append(parts, "there is no network (allow_network = false)")
	}
	if len(parts) == 0 {
		return ""
	}
	allow := `sandbox_profile = "none"`
	switch {
	case offline && denied:
		allow = `allow_network = true (for the network) or sandbox_profile = "none" (for writes)`
	case offline:
		allow = "allow_network = true"
	}
	return fmt.Sprintf("This may be the sandbox (profile %q): %s. That is policy, not a fault; "+
		"if the tool really needs more, an operator can set %s.",
		p.Profile, strings.Join(parts, "; "), settingFor(tool, allow))
}

// startFailure maps a failed start to the error the client sees: the
// sandbox refusing (permission_denied, with its reason), or the program
// not starting (internal, with what the helper said).
func startFailure(tool, command string, err error) error {
	var se *startError
	if !errors.As(err, &se) {
		return fmt.Errorf("%s: %w", tool, err)
	}
	if ue := (*sandbox.UnenforceableError)(nil); errors.As(se.err, &ue) {
		return unenforceable(tool, ue) // the probe changed between Check and Start
	}
	var sbe *sandbox.StartError
	if errors.As(se.err, &sbe) && sbe.Stage != "exec" {
		msg := fmt.Sprintf("%s could not be started in its sandbox (%s: %v).", tool, sbe.Stage, programProblem(sbe.Err))
		if sbe.Stderr != "" {
			msg += " The sandbox said:\n" + sbe.Stderr
		}
		return &tools.Error{Kind: tools.KindInternal, Message: msg}
	}
	return tools.Errorf(tools.KindInternal, "%s: command %q could not be started: %v", tool, command, programProblem(se.err))
}

// unenforceable is the refusal of a run whose profile this host cannot
// enforce: what is missing (the error says how to fix it) and the setting
// that would run the tool without the sandbox instead.
func unenforceable(tool string, err error) error {
	return tools.Errorf(tools.KindPermissionDenied, "%s cannot run: %v. Either fix that on this host, or an operator can set %s "+
		"to run it without troupe's sandbox.", tool, err, settingFor(tool, `sandbox_profile = "none"`))
}

// workDir picks and checks the call's working directory: the session's,
// else the configured one, else the workspace root.
func (t *commandTool) workDir(sessionCwd string) (string, error) {
	p, from := sessionCwd, "set by the session"
	if p == "" {
		p, from = t.def.Cwd, "configured"
	}
	if p == "" {
		return t.ws.Dir(), nil
	}
	dir, err := t.ws.WorkDir(p)
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
func (t *commandTool) result(res *runResult, out *spool.Output, redact func(string) string) (*protocol.CallToolResult, error) {
	name := t.def.Name
	if ws, ok := res.state.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
		return nil, &tools.Error{Kind: KindCommandFailed, Message: fmt.Sprintf(
			"%s: the program was killed by signal %s (%s).%s", name, unix.SignalName(ws.Signal()), ws.Signal(), excerpts(out))}
	}
	if code := res.state.ExitCode(); code != 0 {
		return nil, &tools.Error{Kind: KindCommandFailed, Message: fmt.Sprintf(
			"%s: the program exited with status %d.%s", name, code, excerpts(out))}
	}

	result := &protocol.CallToolResult{
		Content: []protocol.Content{protocol.TextContent(out.Stdout.Text())},
		Meta: map[string]any{protocol.MetaPrefix + "process": map[string]any{
			"exitCode":        0,
			"stdoutBytes":     out.Stdout.Total(),
			"stderrBytes":     out.Stderr.Total(),
			"stdoutTruncated": out.Stdout.Truncated(),
			"durationMs":      res.duration.Milliseconds(),
		}},
	}
	if t.output == nil {
		return result, nil
	}
	structured, err := t.structured(out.Stdout)
	if err != nil {
		return nil, err
	}
	result.StructuredContent = structured
	return result, nil
}

// structured checks stdout against the output schema. A program whose
// output breaks its declared contract is a fault of the tool, not of the
// call's arguments, so the error is internal (with the violations, which
// is what the operator needs to fix the program or the schema).
func (t *commandTool) structured(stdout *spool.Capture) (json.RawMessage, error) {
	name := t.def.Name
	whole, ok := stdout.Bytes(MaxOutputBytes)
	if !ok {
		return nil, tools.Errorf(tools.KindInternal,
			"%s: the output (%d bytes) is too large to check against the tool's output schema (limit %d bytes)",
			name, stdout.Total(), MaxOutputBytes)
	}
	doc, err := jsonschema.UnmarshalJSON(bytes.NewReader(whole))
	if _, isObject := doc.(map[string]any); err != nil || !isObject {
		return nil, tools.Errorf(tools.KindInternal,
			"%s: the output is not a JSON object, as the tool's output schema requires. Output:\n%s",
			name, stdout.Last(stdoutExcerptBytes))
	}
	if err := t.output.Validate(doc); err != nil {
		return nil, tools.Errorf(tools.KindInternal,
			"%s: the output does not match the tool's output schema:\n%s", name, violations(err))
	}
	var b bytes.Buffer
	if err := json.Compact(&b, whole); err != nil {
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
func excerpts(out *spool.Output) string {
	var b strings.Builder
	for _, o := range []struct {
		c *spool.Capture
		n int
	}{{out.Stdout, stdoutExcerptBytes}, {out.Stderr, stderrExcerptBytes}} {
		switch total := o.c.Total(); {
		case total == 0:
			continue
		case total <= int64(o.n):
			fmt.Fprintf(&b, "\n\n%s:\n", o.c.Name())
		default:
			fmt.Fprintf(&b, "\n\n%s (the last %d of %d bytes):\n", o.c.Name(), o.n, total)
		}
		b.WriteString(o.c.Last(o.n))
	}
	if b.Len() == 0 {
		return " It wrote no output."
	}
	return b.String()
}
