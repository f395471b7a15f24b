package command

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"troupe/protocol"
	"troupe/sandbox"
	"troupe/spool"
	"troupe/tools"
	"troupe/workspace"
)

// NameShell is the shell tool's name.
const NameShell = "shell.exec"

// ShellOptions configure shell.exec.
type ShellOptions struct {
	// Workspace is the directory commands run in and may write to.
	Workspace string
	// SandboxProfile isolates every command ("" means "default").
	SandboxProfile string
	// AllowNetwork lets sandboxed commands use the network.
	AllowNetwork bool
	// Sandbox starts the commands; required unless the profile is "none".
	Sandbox *sandbox.Sandbox
	// Limits are each run's resource limits.
	Limits sandbox.Limits
	// Timeout is the ceiling of one call (0: DefaultTimeout); a call's
	// timeout_ms may only lower it.
	Timeout time.Duration
	// KillGrace is the SIGTERM→SIGKILL grace (0: DefaultKillGrace).
	KillGrace time.Duration
}

const shellInput = `{
  "type": "object",
  "properties": {
    "command": {"type": "array", "items": {"type": "string"}, "minItems": 1,
      "description": "The program and its arguments, e.g. [\"git\", \"status\"]. No shell runs it: use [\"bash\", \"-lc\", \"...\"] for pipes and globs."},
    "cwd": {"type": "string", "description": "Working directory, relative to the workspace root (default: the root)."},
    "timeout_ms": {"type": "integer", "minimum": 1, "description": "Stop the command after this long; the server's ceiling applies."},
    "env": {"type": "object", "additionalProperties": {"type": "string"}, "description": "Variables to set on top of the baseline environment."}
  },
  "required": ["command"],
  "additionalProperties": false
}`

const shellOutput = `{
  "type": "object",
  "properties": {
    "exit_code": {"type": "integer", "description": "The program's exit status; 128+N when it died of signal N."},
    "stdout": {"type": "string"},
    "stderr": {"type": "string"},
    "truncated": {"type": "boolean", "description": "stdout or stderr is shown as head and tail only; the result links the whole streams."},
    "timed_out": {"type": "boolean"},
    "duration_ms": {"type": "integer"},
    "sandbox_note": {"type": "string", "description": "Present when the failure looks like the sandbox refusing (a denied write, no network): what policy applies and what would allow more."}
  },
  "required": ["exit_code", "stdout", "stderr", "truncated", "timed_out", "duration_ms"]
}`

// shellTool is shell.exec.
type shellTool struct {
	opts    ShellOptions
	spec    tools.Spec
	base    map[string]string
	ws      workspace.Dirs
	profile sandbox.Profile
	timeout time.Duration
	grace   time.Duration
}

// shellArgs are shell.exec's arguments.
type shellArgs struct {
	Command   []string          `json:"command"`
	Cwd       string            `json:"cwd"`
	TimeoutMs int64             `json:"timeout_ms"`
	Env       map[string]string `json:"env"`
}

// Shell returns shell.exec: it runs an argv in the workspace under the
// sandbox profile, and is high-risk (every call needs a person's
// approval, whatever the configuration says).
func Shell(opts ShellOptions) (tools.Tool, error) {
	if !supported {
		return nil, errors.New("shell.exec is supported on Linux only")
	}
	profile, err := sandbox.ParseProfile(opts.SandboxProfile)
	if err != nil {
		return nil, fmt.Errorf("shell.exec: %w", err)
	}
	t := &shellTool{opts: opts, base: baseEnv(), profile: profile, timeout: opts.Timeout, grace: opts.KillGrace}
	if t.timeout <= 0 {
		t.timeout = DefaultTimeout
	}
	if t.grace <= 0 {
		t.grace = DefaultKillGrace
	}
	if t.ws, err = workspace.ResolveDirs(opts.Workspace); err != nil {
		return nil, fmt.Errorf("shell.exec: %w", err)
	}
	no, yes := false, true
	t.spec = tools.Spec{
		Name:  NameShell,
		Title: "Run a command",
		Description: "Runs a program with arguments (an argv array, like Codex's shell tool) in the workspace and returns " +
			"its exit code, stdout and stderr. It runs in troupe's sandbox (profile " + string(profile) + "): files " +
			"outside the workspace are read-only" + networkNote(profile, opts.AllowNetwork) + ". Every call needs " +
			"a person's approval. Long output is cut to a head and tail; the result links the whole output as resources.",
		InputSchema:  json.RawMessage(shellInput),
		SchemasFixed: true, // constants; CheckSchemas in the tests
		OutputSchema: json.RawMessage(shellOutput),
		Annotations: &protocol.ToolAnnotations{Title: "Run a command", ReadOnlyHint: &no, DestructiveHint: &yes,
			OpenWorldHint: &opts.AllowNetwork},
		Safety: tools.Safety{RequiresApproval: true, HighRisk: true, SandboxProfile: string(profile),
			AllowNetwork: opts.AllowNetwork, SideEffects: shellEffects(opts.AllowNetwork), Timeout: t.timeout, Streaming: true},
	}
	return t, nil
}

func networkNote(p sandbox.Profile, allow bool) string {
	switch {
	case p == sandbox.ProfileNone:
		return " unless the profile is none, as here (no isolation)"
	case allow:
		return "; the network is allowed"
	}
	return "; there is no network"
}

func shellEffects(network bool) []string {
	if network {
		return []string{"filesystem", "process", "network"}
	}
	return []string{"filesystem", "process"}
}

// Spec implements tools.Tool.
func (t *shellTool) Spec() tools.Spec { return t.spec }

// resolve decodes and checks a call.
func (t *shellTool) resolve(req *tools.Request) (*shellArgs, string, map[string]string, error) {
	var a shellArgs
	if err := json.Unmarshal(req.Arguments, &a); err != nil {
		return nil, "", nil, tools.Errorf(tools.KindInvalidArgument, "shell.exec: %v", err)
	}
	if a.Command[0] == "" {
		return nil, "", nil, tools.Errorf(tools.KindInvalidArgument, "shell.exec: command[0] (the program) is empty")
	}
	if !filepath.IsAbs(a.Command[0]) && strings.ContainsRune(a.Command[0], '/') {
		return nil, "", nil, tools.Errorf(tools.KindInvalidArgument,
			"shell.exec: the program %q must be a name on PATH or an absolute path (use [\"./script\"] as [\"bash\", \"./script\"])", a.Command[0])
	}
	for _, s := range a.Command {
		if strings.ContainsRune(s, 0) {
			return nil, "", nil, tools.Errorf(tools.KindInvalidArgument, "shell.exec: arguments must not contain NUL bytes")
		}
	}
	if err := checkEnv(a.Env); err != nil {
		return nil, "", nil, tools.Errorf(tools.KindInvalidArgument, "shell.exec: env: %v", err)
	}
	var over tools.Overrides
	if req.Overrides != nil {
		over = *req.Overrides
	}
	if err := checkEnv(over.Env); err != nil {
		return nil, "", nil, tools.Errorf(tools.KindInvalidArgument, "shell.exec: the session's %v", err)
	}
	cwd, from := a.Cwd, "given"
	if cwd == "" {
		cwd, from = over.Cwd, "set by the session"
	}
	dir := t.ws.Dir()
	if cwd != "" {
		d, err := t.ws.WorkDir(cwd)
		if err != nil {
			return nil, "", nil, dirError(NameShell, cwd, from, err)
		}
		dir = d
	}
	return &a, dir, mergeEnv(over.Env, a.Env), nil
}

// Preview implements tools.Previewer.
func (t *shellTool) Preview(req *tools.Request) (*tools.Preview, error) {
	a, dir, env, err := t.resolve(req)
	if err != nil {
		return nil, err
	}
	p := &tools.Preview{Cwd: t.ws.RelOf(dir), Env: env, Command: a.Command}
	if a.TimeoutMs > 0 {
		p.Timeout = time.Duration(a.TimeoutMs) * time.Millisecond
	}
	return p, nil
}

// Call implements tools.Tool.
func (t *shellTool) Call(ctx context.Context, req *tools.Request) (*protocol.CallToolResult, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	a, dir, env, err := t.resolve(req)
	if err != nil {
		return nil, err
	}
	timeout := t.timeout
	if requested := time.Duration(a.TimeoutMs) * time.Millisecond; a.TimeoutMs > 0 && requested < timeout {
		timeout = requested
	}
	return execute(ctx, req, execution{
		tool: NameShell, command: a.Command[0], argv: a.Command[1:], dir: dir, env: mergeEnv(t.base, env),
		secretEnv: []map[string]string{env}, timeout: timeout, grace: t.grace, streaming: true,
		sandbox: t.opts.Sandbox, policy: sandbox.Policy{Profile: t.profile, Workspace: t.ws.Dir(),
			AllowNetwork: t.opts.AllowNetwork, Limits: t.opts.Limits},
		finish: func(res *runResult, out *spool.Output, _ func(string) string) (*protocol.CallToolResult, error) {
			code := res.state.ExitCode()
			if ws, ok := res.state.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
				code = 128 + int(ws.Signal())
			}
			return tools.StructuredResult(ShellReport(out, code, false, res.duration))
		},
	})
}

// Stopped implements tools.Stopper: a call stopped at its deadline still
// reports in the tool's own shape, with what the program wrote so far.
func (t *shellTool) Stopped(out *spool.Output, ran time.Duration) any {
	return ShellReport(out, -1, true, ran)
}

// ShellReport is shell.exec's structured result for out.
func ShellReport(out *spool.Output, exitCode int, timedOut bool, d time.Duration) map[string]any {
	return map[string]any{
		"exit_code":   exitCode,
		"stdout":      out.Stdout.Text(),
		"stderr":      out.Stderr.Text(),
		"truncated":   out.Stdout.Truncated() || out.Stderr.Truncated(),
		"timed_out":   timedOut,
		"duration_ms": d.Milliseconds(),
	}
}
