// Package codexagent offers OpenAI's Codex agent as two troupe tools:
// codex starts a conversation with a prompt and returns Codex's final
// message, codex-reply continues a conversation codex started.
//
//	ts, err := codexagent.Tools(codexagent.Options{
//		Binary:    "/usr/local/bin/codex",
//		Workspace: "/home/me/project",
//		Env:       map[string]string{"PATH": "/usr/bin:/bin", "HOME": home, "CODEX_HOME": codexHome},
//		Surface:   true, // troupe's approval and sandbox defaults
//		Sandbox:   sb,   // every Codex runs in troupe's sandbox
//		StateDir:  "/home/me/.local/state/troupe/codex", // Codex's homes (home.go)
//	})
//	// ts[0] is "codex", ts[1] is "codex-reply"; add them to the registry.
//
// # How Codex is driven: `codex app-server`
//
// Codex CLI 0.169 has two machine interfaces. `codex exec --json` prints
// JSONL events and `codex exec resume <id>` continues a session, but it
// cannot ask anybody anything: approvals are impossible (an MCP server's
// elicitation is declined, a command that needs approval fails), and
// base instructions cannot be set. `codex app-server` (marked experimental)
// speaks newline-delimited JSON-RPC on stdio and has everything these
// tools need: thread/start (model, cwd, approvalPolicy, sandbox, config
// overrides, baseInstructions), thread/resume, turn/start, turn/interrupt,
// a notification for every event (turn/started, item/started,
// item/completed, turn/completed with the turn's status and error), and
// server-to-client requests for approvals
// (item/commandExecution/requestApproval, item/fileChange/requestApproval).
// So this package uses app-server. (`codex mcp-server`, which the Rust
// crate's codex/codex-reply tools came from, no longer exists in 0.169.)
//
// One call is one app-server process, not one per conversation: troupe
// starts `codex app-server`, sends initialize, thread/start (codex) or
// thread/resume (codex-reply), turn/start, relays what happens until
// turn/completed, then closes stdin and lets Codex exit. Codex itself
// keeps the conversation in its rollout files under CODEX_HOME (the
// tools' home of troupe's, home.go), which is why resume works from a
// fresh process and why no process outlives a call (nothing to leak
// between calls, nothing to supervise).
//
// # Codex in troupe's sandbox
//
// Every app-server starts through Options.Sandbox (startCodex): troupe's
// default profile with the network on, the workspace and its home
// writable, and user namespaces allowed, so Codex's own bubblewrap
// sandbox works inside troupe's. Whatever Codex starts (the commands of a
// turn, an escalated command a person approved, MCP servers named in the
// operator's config) is confined by troupe and killed with the run. What
// a client may set of Codex's configuration is an allow-list
// (clientconfig.go); a home's config.toml never trusts the workspace, so
// a .codex/config.toml planted there is not read.
//
// # Conversation ids and results
//
// The conversation id is Codex's thread id. Both tools answer with the
// final message as the first text content (all 0.42 answered) and
// structuredContent {threadId, content} as 0.153 did, plus
// {conversationId, message}, troupe's earlier names for the same values;
// codex-reply takes the id as threadId (0.153) or conversationId (0.42).
// The codex tool also takes the arguments only older releases had:
// developer-instructions, compact-prompt, include-plan-tool (ignored) and
// approval-policy on-failure (on-request in 0.169). The tools keep a
// bounded in-memory table (maxConversations, least recently used dropped)
// of the ids they started, with what a resume needs (cwd, sandbox):
// codex-reply accepts only ids in that table, so a client cannot resume
// arbitrary Codex sessions found on disk. The table belongs to the value
// Tools returns; ids do not survive a restart of troupe, nor cross
// between troupe processes (the rollout files stay in the tools' home). A
// conversation runs one turn at a time: a codex-reply while a turn of the
// same conversation runs is refused (unavailable).
//
// # What the client sees while Codex works
//
//   - Progress: one notifications/progress per Codex event worth a line
//     ("turn started", "running: <command>", "editing files", "message"),
//     sent only when the client asked for progress.
//   - Log: every Codex notification except the token-level deltas, as a
//     notifications/message at level info whose data is
//     {"type": "<app-server method>", ...the notification's params}.
//   - codex/event: what the old `codex mcp-server` (0.153) and
//     `codex mcp serve` (0.42) sent, for their clients: params
//     {"_meta": {"requestId": <the tools/call id>, "threadId": ...},
//     "id": <the turn id, "" for session_configured>, "msg": <event>},
//     the event translated from app-server's notification by legacyEvent
//     (events.go): session_configured, task_started, user_message,
//     agent_message, exec_command_begin/end, patch_apply_begin/end,
//     exec_approval_request, token_count, turn_diff, task_complete,
//     turn_aborted, error, ... with the fields those releases were
//     recorded sending. It goes through the call's Session when there is
//     one, else through a Reporter that is a tools.Notifier. Token-level
//     deltas are not sent (the completed events carry the text), nor
//     0.153's raw_response_item/item_started/item_completed duplicates;
//     session_configured has no rollout_path (a host path).
//   - Approvals: when Codex asks to run a command or change files (it does
//     so according to approval-policy: untrusted asks for nearly every
//     command, on-request when the model asks to escalate, never not at
//     all), the request becomes an elicitation/create form for a person
//     (one enum field with Codex's own decisions: accept, acceptForSession,
//     decline, cancel — cancel also stops the turn) and the answer goes
//     back to Codex. Clients written for the old server may answer with
//     its top-level {"decision": "approved" | "approved_for_session" |
//     "denied" | "abort"} instead; that is understood too. No client to ask, an error or an unusable answer
//     declines. Other Codex requests (questions to the user, MCP
//     elicitations, permission grants, dynamic tools) are refused with a
//     JSON-RPC error: this is a non-interactive relay.
//
// # The management methods of Codex's former MCP server
//
// Methods returns newConversation, listConversations, resumeConversation,
// archiveConversation, sendUserMessage, sendUserTurn,
// interruptConversation, add/removeConversationListener, gitDiffToRemote,
// the auth and config methods and getUserAgent as tools whose names are the
// method names, for troupe to serve as JSON-RPC methods beside MCP
// (actors.SessionOptions.Methods): their params and results are those of
// `codex mcp serve` 0.42. Unlike the tools they need a process that
// outlives a call (a listener's events, a turn that sendUserTurn started
// and answered at once), so each session that uses them gets one
// long-lived app-server (appclient.go: requests matched by id,
// notifications fanned out by thread, bounded queues), at most
// MethodOptions.MaxProcesses at a time, stopped when the session ends
// (tools.SessionEnder). They reach the client after their call through
// tools.Session: listener events as codex/event/<type>, authStatusChange,
// and Codex's approval questions as the old execCommandApproval and
// applyPatchApproval requests. A session sees only the conversations it
// created or resumed unless MethodOptions.ShareConversations.
//
// # Isolation and lifetime
//
// troupe does not sandbox Codex (the tools' sandbox profile is "none"):
// Codex confines the commands it runs with its own sandbox (the sandbox
// argument, default from Codex's config). What troupe adds depends on
// Options.Surface, the feature gate features.enable_mcp_server_surface:
//
//   - On (troupe's MCP server surface, the default configuration): both
//     tools are high risk, so every call needs a person's approval, and
//     Codex's sandbox is never wider than workspace-write for anything
//     troupe starts, the management methods' threads and turns included.
//     One function, confine (sandbox.go), sees every thread/start,
//     thread/resume and turn/start: a client's danger-full-access
//     becomes workspace-write, and when nothing is asked but the thread's
//     effective sandbox (Codex states it when the thread starts or
//     resumes; the user's config.toml may say danger-full-access) is
//     wider, turn/start asks for workspace-write without network. Each
//     narrowing is logged (Options.Logger, info).
//   - Off (legacy, for clients of Codex's own servers while they
//     migrate): no troupe gate, and the sandbox is what the client asks
//     for.
//
// Codex's own approval questions are relayed in both modes, and the
// tools' names, titles and input schemas and the methods' params are the
// same in both; only the descriptions' sentence about approval and
// confinement differs. Codex runs as the leader of its
// own process group with exactly Options.Env as its environment. When the
// call's context ends (client cancel, deadline) or the turn ceiling
// (Options.Timeout) passes, troupe asks Codex to interrupt the turn, then
// sends SIGTERM to the group and SIGKILL after a grace period; the leader
// is awaited without reaping first (waitid WNOWAIT) so the group id cannot
// be reused under the final SIGKILL. Linux only, like troupe's command tools.
package codexagent
