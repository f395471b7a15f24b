package command

import (
	"context"
	"encoding/json"
	"time"

	"troupe/protocol"
	"troupe/spool"
	"troupe/tools"
)

// NameOneOff is the name of execOneOffCommand, the management method of
// Codex's former MCP server that runs one argv and returns its exit code
// and output.
const NameOneOff = "execOneOffCommand"

// oneOffInput is execOneOffCommand's params as Codex's former server took
// them. sandboxPolicy is accepted and not obeyed: troupe's own profile
// confines the command, whatever the client asks for (danger-full-access
// included). Unknown members are ignored, as that server ignored them.
const oneOffInput = `{
  "type": "object",
  "properties": {
    "command": {"type": "array", "items": {"type": "string"}, "minItems": 1, "description": "The program and its arguments."},
    "timeoutMs": {"type": ["integer", "null"], "minimum": 1, "description": "Stop the command after this long; troupe's ceiling applies."},
    "cwd": {"type": "string", "description": "Working directory: relative to the workspace, or absolute inside it (default: the workspace)."},
    "sandboxPolicy": {"type": "object", "description": "Accepted for compatibility; troupe's sandbox profile applies instead."}
  },
  "required": ["command"]
}`

// oneOffTool is execOneOffCommand served by shell.exec's machinery: the
// same checks, approval (it is high risk: a person approves every run,
// which Codex's former server never asked for), sandbox, deadline and
// output spool, with the old server's params and result.
type oneOffTool struct {
	shell *shellTool
	spec  tools.Spec
}

// OneOff returns execOneOffCommand for a methods registry
// (actors.SessionOptions.Methods): its result, the method's answer, is
// {exitCode, stdout, stderr} as Codex's former server answered.
func OneOff(opts ShellOptions) (tools.Tool, error) {
	t, err := Shell(opts)
	if err != nil {
		return nil, err
	}
	sh := t.(*shellTool)
	spec := sh.spec
	spec.Name, spec.Title = NameOneOff, "Run a one-off command"
	spec.Description = "Codex's execOneOffCommand: runs an argv in the workspace under troupe's sandbox (profile " +
		string(sh.profile) + ") after a person approves it, and answers its exit code, stdout and stderr."
	spec.InputSchema, spec.OutputSchema, spec.Annotations = json.RawMessage(oneOffInput), nil, nil
	spec.Safety.Streaming = false
	return &oneOffTool{shell: sh, spec: spec}, nil
}

// Spec implements tools.Tool.
func (t *oneOffTool) Spec() tools.Spec { return t.spec }

// shellRequest is req with execOneOffCommand's params put as shell.exec's
// arguments.
func (t *oneOffTool) shellRequest(req *tools.Request) (*tools.Request, error) {
	var p struct {
		Command   []string `json:"command"`
		TimeoutMs *int64   `json:"timeoutMs"`
		Cwd       string   `json:"cwd"`
	}
	if err := json.Unmarshal(req.Arguments, &p); err != nil {
		return nil, tools.Errorf(tools.KindInvalidArgument, "%s: %v", NameOneOff, err)
	}
	a := shellArgs{Command: p.Command, Cwd: p.Cwd}
	if p.TimeoutMs != nil {
		a.TimeoutMs = *p.TimeoutMs
	}
	b, err := json.Marshal(a)
	if err != nil {
		return nil, err
	}
	r := *req
	r.Arguments = b
	return &r, nil
}

// Preview implements tools.Previewer: the approval form shows what
// shell.exec would run.
func (t *oneOffTool) Preview(req *tools.Request) (*tools.Preview, error) {
	r, err := t.shellRequest(req)
	if err != nil {
		return nil, err
	}
	return t.shell.Preview(r)
}

// Call implements tools.Tool.
func (t *oneOffTool) Call(ctx context.Context, req *tools.Request) (*protocol.CallToolResult, error) {
	r, err := t.shellRequest(req)
	if err != nil {
		return nil, err
	}
	res, err := t.shell.Call(ctx, r)
	if err != nil || res.IsError {
		return res, err
	}
	var report struct {
		ExitCode int    `json:"exit_code"`
		Stdout   string `json:"stdout"`
		Stderr   string `json:"stderr"`
	}
	raw, _ := res.StructuredContent.(json.RawMessage)
	if err := json.Unmarshal(raw, &report); err != nil {
		return nil, err
	}
	return tools.StructuredResult(oneOffReport(report.ExitCode, report.Stdout, report.Stderr))
}

// Stopped implements tools.Stopper: a command stopped at its deadline
// answers in the method's shape, exit code -1, with the output so far.
func (t *oneOffTool) Stopped(out *spool.Output, _ time.Duration) any {
	return oneOffReport(-1, out.Stdout.Text(), out.Stderr.Text())
}

func oneOffReport(code int, stdout, stderr string) map[string]any {
	return map[string]any{"exitCode": code, "stdout": stdout, "stderr": stderr}
}
