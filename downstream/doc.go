// Package downstream is troupe's side of the MCP servers configured under
// [mcp_servers.<name>], whose tools troupe serves as its own. The feature
// has three parts, from the wire up:
//
//   - Client (Dial) is an MCP client of one server: it connects (a child
//     process over stdio, or streamable HTTP), performs the handshake (or
//     finds a 2026-07-28 server with server/discover and speaks to it
//     statelessly), lists the tools and calls them, relaying what the
//     server sends during a call to that call's Observer.
//   - Server (Start) supervises one configured server: an actor owns its
//     Client, dials within Spec.StartupTimeout, pings every
//     Spec.PingInterval, re-lists the tools on
//     notifications/tools/list_changed (at most one listing in flight and
//     one pending, however many notifications arrive), and when the
//     connection is lost dials again with exponential backoff (0.5 s up to
//     30 s), keeping the last tool list so tool names stay stable. The
//     Server handle publishes its state (connecting, ready, down), tools
//     and last error; AwaitStartup waits for servers' first attempts. The
//     actor runs on its owner's actor system (Runtime): troupe's
//     actors.Host starts it (Host.StartDownstream) and stops it at Close.
//   - The proxied tools (package tools/proxy) are troupe tools that call
//     through a Server (proxy.Server is its interface): app builds one per
//     listed tool each time a Server's tools change (Spec.Changed), and
//     the registry serves them beside troupe's own, through troupe's gate.
//
// So a client's tools/call of a proxied tool travels: session, invocation
// and gate (package actors), the proxy tool, Server.CallTool, the current
// Client, the downstream server; and back the same way, the Client's
// Observer relaying progress, log messages and questions to the caller.
//
// # The client
//
//	c, err := downstream.Dial(ctx, downstream.Config{
//		Name:       "github",
//		Command:    "github-mcp-server",
//		Args:       []string{"stdio"},
//		Env:        map[string]string{"PATH": "/usr/bin:/bin", "GITHUB_TOKEN": token},
//		ClientInfo: protocol.Implementation{Name: "troupe", Version: "1"},
//	}, downstream.Handlers{ToolsChanged: func() { /* re-list later */ }})
//	if err != nil {
//		return err
//	}
//	defer c.Close()
//	tools, err := c.ListTools(ctx) // raw tool objects, passed through as sent
//	res, err := c.CallTool(ctx, "search", json.RawMessage(`{"q":"troupe"}`), downstream.Observer{
//		Progress: func(p, total float64, msg string) { /* relay */ },
//	})
//
// A Client is one session. It does not reconnect: when the connection is
// lost (the process exits, the HTTP session expires or the server becomes
// unreachable) Done is closed, every call in flight fails with an error
// wrapping ErrClosed, and the owner (a Server's actor) dials again.
//
// # Transports
//
// stdio: the server runs as a child process in its own process group, with
// exactly the environment in Config.Env, started by Config.Start (troupe's
// sandbox) when set. Messages are lines on its stdin and stdout, read
// through protocol/framing, so a malformed line costs one message and
// never the stream. Its stderr is logged line by line at debug level, and
// its last lines (Config.Redact masking secrets) go into the *ExitError
// that the lost connection's errors wrap: how the process ended, where a
// server that cannot start says why.
// Close closes its stdin, sends SIGTERM to the group and SIGKILL 2 s
// later; the process is always reaped.
//
// Streamable HTTP (2025-03-26 and later): every message is a POST; an
// answer may be JSON or an SSE stream, whose requests and notifications
// before the response belong to that call. A stream the server closes
// early is resumed with GET and Last-Event-ID. The session id from
// initialize and the negotiated MCP-Protocol-Version go on every later
// request, a standalone GET stream carries what the server sends outside of
// calls, and Close ends the session with DELETE. The bearer token is sent
// as a header and never appears in errors or logs.
//
// # Attributing server messages to calls
//
// What a server sends during a call reaches that call's Observer only when
// it provably belongs to the call:
//
//   - notifications/progress carries the call's progress token (every call
//     sends a unique one), so it is matched exactly on both transports.
//   - notifications/elicitation/complete names the elicitationId of a
//     URL-mode elicitation relayed for a call, so it is matched exactly too.
//   - notifications/message and elicitation/create carry no link to a
//     request. Over streamable HTTP they belong to the call whose POST
//     stream carried them. Over stdio MCP offers no link at all, so a log
//     message is attributed to a call only while exactly one call is in
//     flight on the client, and an elicitation only while exactly one
//     call in flight is not already waiting for the answer to a question
//     of its own (a call blocked in a question does not ask the next one;
//     a parked call waits so for its caller's retry, up to
//     approvals.timeout, and must not make every other call's question
//     unattributable meanwhile). Otherwise a log message goes to troupe's
//     log and an elicitation is declined ({"action":"decline"}). One caller
//     never sees another caller's downstream traffic, with one exception
//     MCP leaves no way to tell: a server that asks a call's second
//     question while its first is unanswered, and another call runs, has
//     it put to the running call. An owner that needs
//     every stdio log message attributed can run one call at a time per
//     client.
//
// Other server requests are answered by the client itself: ping with {},
// roots/list with an empty list, anything else with -32601.
package downstream
