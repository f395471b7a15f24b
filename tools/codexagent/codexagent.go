package codexagent

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
	"time"

	"github.com/pelletier/go-toml/v2"

	"troupe/protocol"
	"troupe/sandbox"
	"troupe/tools"
)

// The tools' names.
const (
	NameCodex = "codex"
	NameReply = "codex-reply"
)

// DefaultTimeout is the ceiling of one turn when Options.Timeout is zero.
const DefaultTimeout = 10 * time.Minute

// Options configure the tools.
type Options struct {
	Binary    string            // the codex executable (absolute path)
	Workspace string            // default cwd; cwd arguments must lie inside it
	Env       map[string]string // the environment Codex runs with (the caller builds it: PATH, HOME, CODEX_HOME, ...)
	Timeout   time.Duration     // ceiling of one turn (0: 10 minutes)
	// Surface says whether the tools are served through troupe's MCP
	// server surface (features.enable_mcp_server_surface, on in the
	// default configuration), which brings troupe's approval and sandbox
	// defaults: codex and codex-reply need a person's approval for every
	// call, and Codex's sandbox is never wider than workspace-write for
	// anything troupe starts (see confine). Off is the legacy behaviour
	// for clients migrating from Codex's own server: no troupe gate, and
	// the sandbox the client asks for. Codex's own approval questions are
	// relayed either way, and the tools' names, input schemas and the
	// methods' params are the same in both modes, so a client works
	// unchanged when the gate flips.
	Surface bool
	// Logger receives the narrowings of Codex's sandbox (info); nil
	// discards them.
	Logger *slog.Logger
	// Sandbox starts every Codex (required): Codex runs in troupe's
	// sandbox (the default profile, with the network, its own home
	// writable and user namespaces allowed, so that its own sandbox works
	// inside troupe's), so nothing Codex starts, whatever its
	// configuration names, escapes troupe's confinement or outlives the
	// call or session.
	Sandbox *sandbox.Sandbox
	// Limits are the resource limits of each Codex run (the [sandbox]
	// limits); MaxProcesses is raised to minCodexProcesses, since Codex's
	// threads count.
	Limits sandbox.Limits
	// StateDir is where troupe keeps Codex's homes (see home.go):
	// absolute, outside the workspace and outside the temporary directory
	// (Codex's sandbox refuses a CODEX_HOME there). Env's CODEX_HOME (or
	// HOME/.codex) is the operator's, which Codex never runs in: troupe
	// copies its config.toml and auth.json into each home.
	StateDir string
}

// minCodexProcesses is the least Limits.MaxProcesses a Codex run gets:
// Codex runs dozens of threads (each counts) besides the commands it
// starts.
const minCodexProcesses = 1024

// toolSet is the state both tools share: the options, resolved, and the
// conversation table.
type toolSet struct {
	opts      Options
	env       []string
	codexHome string
	wsReal    string
	timeout   time.Duration
	convs     *conversations
	log       *slog.Logger
	// onStart, when set (tests), learns the pid of every Codex started.
	onStart func(pid int)
	homes   *homes
}

// Tools returns codex and codex-reply, sharing one conversation table. It
// fails when Binary is not an executable file or Workspace is not a
// directory. Whether Binary really is Codex 0.169 or later is found out at
// the first call (app-server must exist).
func Tools(opts Options) ([]tools.Tool, error) {
	if !supported {
		return nil, errors.New("the codex tools are supported on Linux only")
	}
	if !filepath.IsAbs(opts.Binary) {
		return nil, fmt.Errorf("codex: binary %q is not an absolute path", opts.Binary)
	}
	fi, err := os.Stat(opts.Binary)
	if err != nil {
		return nil, fmt.Errorf("codex: %w", err)
	}
	if !fi.Mode().IsRegular() || fi.Mode().Perm()&0o111 == 0 {
		return nil, fmt.Errorf("codex: %s is not an executable file", opts.Binary)
	}
	ws, err := filepath.EvalSymlinks(opts.Workspace)
	if err == nil {
		ws, err = filepath.Abs(ws)
	}
	if err != nil {
		return nil, fmt.Errorf("codex: workspace: %w", err)
	}
	if fi, err := os.Stat(ws); err != nil || !fi.IsDir() {
		return nil, fmt.Errorf("codex: workspace %s is not a directory", opts.Workspace)
	}
	if opts.Sandbox == nil {
		return nil, errors.New("codex: Options.Sandbox is required: Codex runs in troupe's sandbox")
	}
	if !filepath.IsAbs(opts.StateDir) {
		return nil, fmt.Errorf("codex: state dir %q is not an absolute path", opts.StateDir)
	}
	if rel, err := filepath.Rel(ws, opts.StateDir); err == nil && rel != ".." && !strings.HasPrefix(rel, "../") {
		return nil, fmt.Errorf("codex: state dir %s lies in the workspace, where every run could write it", opts.StateDir)
	}
	s := &toolSet{opts: opts, wsReal: ws, timeout: opts.Timeout, convs: newConversations(maxConversations), log: opts.Logger}
	if s.log == nil {
		s.log = slog.New(slog.DiscardHandler)
	}
	if s.timeout <= 0 {
		s.timeout = DefaultTimeout
	}
	keys := make([]string, 0, len(opts.Env))
	for k := range opts.Env {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		s.env = append(s.env, k+"="+opts.Env[k])
	}
	// Codex's own default, so profiles are found where Codex looks.
	s.codexHome = OperatorHome(opts.Env)
	root, err := stateDir(opts.StateDir)
	if err != nil {
		return nil, err
	}
	s.homes = &homes{root: root, operator: s.codexHome, workspace: ws}
	return []tools.Tool{&codexTool{s}, &replyTool{s}}, nil
}

// codexInput accepts every property the codex tool of Codex 0.42
// (`codex mcp serve`) and 0.153 (`codex mcp-server`) took, so their
// clients keep working: include-plan-tool (0.42) is accepted and ignored
// (0.169 has no such switch), approval-policy on-failure (0.42; gone from
// 0.169) means on-request, compact-prompt (0.153) is the compact_prompt
// configuration key. cwd differs on purpose: it must lie inside the
// workspace.
const codexInput = `{
  "type": "object",
  "properties": {
    "prompt": {"type": "string", "minLength": 1, "description": "The task for Codex: what a person would type as the first message."},
    "model": {"type": "string", "description": "The model Codex should use (default: Codex's configuration)."},
    "profile": {"type": "string", "pattern": "^[A-Za-z0-9_.-]+$", "description": "A Codex configuration profile: CODEX_HOME/<profile>.config.toml is applied on top of Codex's configuration."},
    "cwd": {"type": "string", "description": "Codex's working directory, relative to the workspace root or absolute inside it (default: the root)."},
    "approval-policy": {"type": "string", "enum": ["untrusted", "on-failure", "on-request", "never"], "description": "When Codex asks before running a command: untrusted (almost always), on-request (when the model asks for more than the sandbox allows; on-failure, from older Codex releases, means the same), never. Questions are relayed to the client as elicitation forms."},
    "sandbox": {"type": "string", "enum": ["read-only", "workspace-write", "danger-full-access"], "description": "Codex's sandbox for the commands it runs. Where troupe confines Codex (the tool's description says so), danger-full-access is narrowed to workspace-write."},
    "config": {"type": "object", "description": "Codex configuration overrides, dotted keys as with codex -c (e.g. {\"model_reasoning_effort\": \"high\"}). Only keys that choose how the model works are accepted (model, model_provider, model_reasoning_effort, model_verbosity, approval_policy, developer_instructions, web_search, ...); keys that start programs, widen the sandbox or trust a project are refused."},
    "base-instructions": {"type": "string", "description": "Instructions that replace Codex's default base instructions."},
    "developer-instructions": {"type": "string", "description": "Instructions added as a developer message, on top of the base instructions."},
    "compact-prompt": {"type": "string", "description": "The prompt Codex uses when it compacts the conversation."},
    "include-plan-tool": {"type": "boolean", "description": "Accepted for older clients and ignored: Codex decides whether it plans."}
  },
  "required": ["prompt"],
  "additionalProperties": false
}`

// replyInput takes the conversation as threadId (0.153's codex-reply) or
// conversationId (0.42's, and troupe's before): both are optional in the
// schema, as in 0.153, and Call requires exactly one (or both equal). A
// top-level anyOf would say the same, but several model providers refuse
// tool schemas that have one.
const replyInput = `{
  "type": "object",
  "properties": {
    "threadId": {"type": "string", "minLength": 1, "description": "The threadId (same as conversationId) a codex call returned. Give threadId or conversationId."},
    "conversationId": {"type": "string", "minLength": 1, "description": "The conversationId a codex call returned; the older name of threadId. Give threadId or conversationId."},
    "prompt": {"type": "string", "minLength": 1, "description": "The next message to Codex in that conversation."}
  },
  "required": ["prompt"],
  "additionalProperties": false
}`

// output is both tools' structuredContent: threadId and content as
// Codex 0.153's codex/codex-reply answered, conversationId and message as
// troupe did before (the same id and text under both names), so clients of
// either read their fields.
const output = `{
  "type": "object",
  "properties": {
    "threadId": {"type": "string", "description": "Pass it to codex-reply (as threadId or conversationId) to continue the conversation."},
    "content": {"type": "string", "description": "Codex's final message of the turn."},
    "conversationId": {"type": "string", "description": "The same as threadId, under its older name."},
    "message": {"type": "string", "description": "The same as content, under troupe's older name."}
  },
  "required": ["threadId", "content", "conversationId", "message"]
}`

// MetaConversationID is the result's _meta key holding the conversation id.
const MetaConversationID = protocol.MetaPrefix + "codex/conversationId"

// spec is a tool's Spec. Only the gate (RequiresApproval, HighRisk) and
// the last sentences of the description depend on Options.Surface; the
// name, title, schemas and annotations are the same in both modes.
func (s *toolSet) spec(name, title, desc, input string) tools.Spec {
	no, yes := false, true
	note := isolationNote
	if s.opts.Surface {
		note = surfaceNote
	}
	return tools.Spec{
		Name: name, Title: title, Description: desc + note,
		InputSchema: json.RawMessage(input), OutputSchema: json.RawMessage(output),
		Annotations: &protocol.ToolAnnotations{Title: title, ReadOnlyHint: &no, DestructiveHint: &yes, OpenWorldHint: &yes},
		Safety: tools.Safety{RequiresApproval: s.opts.Surface, HighRisk: s.opts.Surface, SandboxProfile: "none", AllowNetwork: true,
			SideEffects: []string{"filesystem", "process", "network"}, Timeout: s.timeout, Streaming: true},
	}
}

// The tools' isolation sentences: isolationNote without troupe's surface
// (legacy), surfaceNote with it (Options.Surface).
const (
	isolationNote = " troupe does not sandbox Codex: Codex applies its own sandbox (the sandbox argument or its configuration) " +
		"to the commands it runs, and asks before running some (approval-policy); those questions are relayed to the client."
	surfaceNote = isolationNote + " troupe keeps that sandbox within workspace-write (danger-full-access is narrowed to it), " +
		"and every call needs a person's approval."
)

// codexTool is the codex tool.
type codexTool struct{ s *toolSet }

// Spec implements tools.Tool.
func (t *codexTool) Spec() tools.Spec {
	return t.s.spec(NameCodex, "Start a Codex session",
		"Runs the Codex coding agent on a prompt in the workspace and returns its final message and a conversationId "+
			"to continue with codex-reply. Codex can read and write files and run commands.", codexInput)
}

// codexArgs are codex's arguments.
type codexArgs struct {
	Prompt           string         `json:"prompt"`
	Model            string         `json:"model"`
	Profile          string         `json:"profile"`
	Cwd              string         `json:"cwd"`
	ApprovalPolicy   string         `json:"approval-policy"`
	Sandbox          string         `json:"sandbox"`
	Config           map[string]any `json:"config"`
	BaseInstructions string         `json:"base-instructions"`
	// What older Codex releases' codex tool took too.
	DeveloperInstructions string `json:"developer-instructions"`
	CompactPrompt         string `json:"compact-prompt"`
	IncludePlanTool       *bool  `json:"include-plan-tool"`
}

// resolve decodes a call and builds the thread/start parameters.
func (t *codexTool) resolve(req *tools.Request) (*codexArgs, string, map[string]any, error) {
	var a codexArgs
	if err := json.Unmarshal(req.Arguments, &a); err != nil {
		return nil, "", nil, tools.Errorf(tools.KindInvalidArgument, "codex: %v", err)
	}
	cwd := a.Cwd
	if cwd == "" && req.Overrides != nil {
		cwd = req.Overrides.Cwd
	}
	dir, err := t.s.dir(cwd)
	if err != nil {
		return nil, "", nil, err
	}
	if err := checkClientConfig("codex: config", a.Config); err != nil {
		return nil, "", nil, err
	}
	config := map[string]any{}
	if a.Profile != "" {
		if config, err = t.s.profile(a.Profile); err != nil {
			return nil, "", nil, err
		}
	}
	if a.CompactPrompt != "" {
		config["compact_prompt"] = a.CompactPrompt
	}
	for k, v := range a.Config { // explicit overrides win over the profile
		config[k] = v
	}
	policy := a.ApprovalPolicy
	if policy == "on-failure" { // gone from Codex 0.169; on-request is the nearest
		policy = "on-request"
	}
	start := map[string]any{"cwd": dir}
	for k, v := range map[string]string{"model": a.Model, "approvalPolicy": policy,
		"sandbox": a.Sandbox, "baseInstructions": a.BaseInstructions, "developerInstructions": a.DeveloperInstructions} {
		if v != "" {
			start[k] = v
		}
	}
	if len(config) > 0 {
		start["config"] = config
	}
	return &a, dir, start, nil
}

// Preview implements tools.Previewer: the approval prompt shows where
// Codex will work, and a bad cwd or profile fails before anyone is asked.
func (t *codexTool) Preview(req *tools.Request) (*tools.Preview, error) {
	_, dir, _, err := t.resolve(req)
	if err != nil {
		return nil, err
	}
	return &tools.Preview{Cwd: t.s.rel(dir), Command: []string{t.s.opts.Binary, "app-server"}}, nil
}

// Call implements tools.Tool.
func (t *codexTool) Call(ctx context.Context, req *tools.Request) (*protocol.CallToolResult, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	a, dir, start, err := t.resolve(req)
	if err != nil {
		return nil, err
	}
	var id string
	defer func() {
		if id != "" {
			t.s.convs.release(id)
		}
	}()
	res, err := t.s.run(ctx, req, turnSpec{tool: NameCodex, dir: dir, start: start, prompt: a.Prompt,
		started: func(threadID string) {
			id = threadID
			sandbox, _ := start["sandbox"].(string) // as sent: confine has run
			t.s.convs.add(threadID, dir, sandbox)
		}})
	if err != nil {
		return nil, err
	}
	return result(res)
}

// replyTool is the codex-reply tool.
type replyTool struct{ s *toolSet }

// Spec implements tools.Tool.
func (t *replyTool) Spec() tools.Spec {
	return t.s.spec(NameReply, "Continue a Codex session",
		"Sends the next prompt to a Codex conversation the codex tool started (by its threadId, also accepted as "+
			"conversationId) and returns "+
			"Codex's final message. Conversation ids live in this troupe process only.", replyInput)
}

// replyArgs are codex-reply's arguments.
type replyArgs struct {
	ThreadID       string `json:"threadId"`
	ConversationID string `json:"conversationId"`
	Prompt         string `json:"prompt"`
}

// parseReply decodes codex-reply's arguments and settles the conversation
// id: threadId or conversationId, exactly one of them (or both equal).
func parseReply(raw json.RawMessage) (*replyArgs, string, error) {
	var a replyArgs
	if err := json.Unmarshal(raw, &a); err != nil {
		return nil, "", tools.Errorf(tools.KindInvalidArgument, "codex-reply: %v", err)
	}
	switch {
	case a.ThreadID == "" && a.ConversationID == "":
		return nil, "", tools.Errorf(tools.KindInvalidArgument,
			"codex-reply: give the conversation as threadId (or conversationId), from a codex call's result")
	case a.ThreadID != "" && a.ConversationID != "" && a.ThreadID != a.ConversationID:
		return nil, "", tools.Errorf(tools.KindInvalidArgument,
			"codex-reply: threadId %q and conversationId %q differ; give one of them", a.ThreadID, a.ConversationID)
	case a.ThreadID != "":
		return &a, a.ThreadID, nil
	}
	return &a, a.ConversationID, nil
}

// Preview implements tools.Previewer: an unknown conversation fails here,
// before anyone is asked to approve continuing it.
func (t *replyTool) Preview(req *tools.Request) (*tools.Preview, error) {
	_, id, err := parseReply(req.Arguments)
	if err != nil {
		return nil, err
	}
	conv, err := t.s.convs.lookup(id)
	if err != nil {
		return nil, err
	}
	return &tools.Preview{Cwd: t.s.rel(conv.cwd), Command: []string{t.s.opts.Binary, "app-server"}}, nil
}

// Call implements tools.Tool.
func (t *replyTool) Call(ctx context.Context, req *tools.Request) (*protocol.CallToolResult, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	a, id, err := parseReply(req.Arguments)
	if err != nil {
		return nil, err
	}
	conv, err := t.s.convs.acquire(id)
	if err != nil {
		return nil, err
	}
	defer t.s.convs.release(conv.id)
	res, err := t.s.run(ctx, req, turnSpec{tool: NameReply, dir: conv.cwd, resumeID: conv.id,
		sandbox: conv.sandbox, prompt: a.Prompt})
	if err != nil {
		return nil, err
	}
	return result(res)
}

// result renders a finished turn: the message as text (what a model
// reads, and all 0.42's codex tool answered), the conversation id in a
// second text block, in structuredContent (0.153's threadId and content,
// troupe's conversationId and message) and in _meta, so every kind of
// client can continue.
func result(res *turnResult) (*protocol.CallToolResult, error) {
	b, err := json.Marshal(map[string]string{"threadId": res.threadID, "content": res.message,
		"conversationId": res.threadID, "message": res.message})
	if err != nil {
		return nil, err
	}
	return &protocol.CallToolResult{
		Content: []protocol.Content{
			protocol.TextContent(res.message),
			protocol.TextContent(fmt.Sprintf("conversationId: %s (continue with codex-reply)", res.threadID)),
		},
		StructuredContent: json.RawMessage(b),
		Meta:              map[string]any{MetaConversationID: res.threadID},
	}, nil
}

// dir resolves a cwd argument: relative to the workspace or absolute, and
// inside the workspace after symlinks.
func (s *toolSet) dir(cwd string) (string, error) {
	if cwd == "" {
		return s.wsReal, nil
	}
	p := cwd
	if !filepath.IsAbs(p) {
		p = filepath.Join(s.wsReal, p)
	}
	real, err := filepath.EvalSymlinks(p)
	if err != nil {
		return "", tools.Errorf(tools.KindNotFound, "codex: cwd %q does not exist in the workspace", cwd)
	}
	if rel, err := filepath.Rel(s.wsReal, real); err != nil || rel == ".." || strings.HasPrefix(rel, "../") {
		return "", tools.Errorf(tools.KindPermissionDenied, "codex: cwd %q is outside the workspace", cwd)
	}
	if fi, err := os.Stat(real); err != nil || !fi.IsDir() {
		return "", tools.Errorf(tools.KindInvalidArgument, "codex: cwd %q is not a directory", cwd)
	}
	return real, nil
}

// rel is dir relative to the workspace ("." for the root).
func (s *toolSet) rel(dir string) string {
	r, err := filepath.Rel(s.wsReal, dir)
	if err != nil {
		return dir
	}
	return r
}

var profileName = regexp.MustCompile(`^[A-Za-z0-9_.-]+$`)

// profile reads CODEX_HOME/<name>.config.toml as dotted-key overrides.
// app-server takes no --profile (only codex and codex exec do, and the
// legacy profile key is refused), so the profile's layer is applied the
// way -c overrides are.
func (s *toolSet) profile(name string) (map[string]any, error) {
	if !profileName.MatchString(name) || strings.Contains(name, "..") {
		return nil, tools.Errorf(tools.KindInvalidArgument, "codex: profile %q is not a profile name", name)
	}
	if s.codexHome == "" {
		return nil, tools.Errorf(tools.KindNotFound, "codex: profile %q: CODEX_HOME is not set", name)
	}
	b, err := os.ReadFile(filepath.Join(s.codexHome, name+".config.toml"))
	if err != nil {
		return nil, tools.Errorf(tools.KindNotFound, "codex: no profile %q (%s.config.toml in CODEX_HOME)", name, name)
	}
	var tree map[string]any
	if err := toml.Unmarshal(b, &tree); err != nil {
		return nil, tools.Errorf(tools.KindInvalidArgument, "codex: profile %q: %v", name, err)
	}
	out := map[string]any{}
	flatten("", tree, out)
	return out, nil
}

// flatten turns nested tables into dotted keys, as -c key=value takes them.
func flatten(prefix string, tree map[string]any, out map[string]any) {
	for k, v := range tree {
		if sub, ok := v.(map[string]any); ok {
			flatten(prefix+k+".", sub, out)
			continue
		}
		out[prefix+k] = v
	}
}

// stateDir makes dir (mode 0700) and returns it with symlinks resolved,
// as the homes' paths are compared with resolved paths.
func stateDir(dir string) (string, error) {
	if err := ensure(dir); err != nil {
		return "", err
	}
	real, err := filepath.EvalSymlinks(dir)
	if err != nil {
		return "", fmt.Errorf("codex: state dir: %w", err)
	}
	return real, nil
}

// OperatorHome is the operator's CODEX_HOME in env: CODEX_HOME, else
// HOME/.codex (Codex's own default), else "".
func OperatorHome(env map[string]string) string {
	if h := env["CODEX_HOME"]; h != "" {
		return h
	}
	if env["HOME"] != "" {
		return filepath.Join(env["HOME"], ".codex")
	}
	return ""
}

// startCodex starts `codex app-server` in dir with home as its
// CODEX_HOME, in troupe's sandbox: the default profile, the network on
// (Codex calls the model's API), the workspace and home (with the shared
// rollouts, when shared) writable, user namespaces allowed (Codex
// sandboxes the commands it runs with bubblewrap, inside troupe's
// sandbox). The operator's CODEX_HOME and troupe's other homes are hidden
// from it.
func (s *toolSet) startCodex(home, dir string) (*process, error) {
	env := make([]string, 0, len(s.env)+1)
	for _, kv := range s.env {
		if !strings.HasPrefix(kv, "CODEX_HOME=") {
			env = append(env, kv)
		}
	}
	env = append(env, "CODEX_HOME="+home)
	limits := s.opts.Limits
	if limits.MaxProcesses > 0 && limits.MaxProcesses < minCodexProcesses {
		limits.MaxProcesses = minCodexProcesses
	}
	pol := sandbox.Policy{Profile: sandbox.ProfileDefault, Workspace: s.wsReal, AllowNetwork: true,
		Writable: s.homes.writable(home), AllowUserNamespaces: true, Limits: limits}
	if s.codexHome != "" {
		pol.Hidden = []string{s.codexHome}
	}
	p, err := startProcess(s.opts.Sandbox, pol, []string{s.opts.Binary, "app-server"}, dir, env)
	if err == nil && s.onStart != nil {
		s.onStart(p.cmd.Process.Pid)
	}
	return p, err
}
