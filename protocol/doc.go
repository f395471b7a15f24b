// Package protocol is MCP as troupe speaks it on the wire: the message
// types, method names, error codes and _meta keys, and the table of
// protocol revisions that says which revision has which feature. It holds
// values and pure functions only: reading and writing lines is package
// protocol/framing, and deciding what to do with a request is the session
// actor's (package actors).
//
// # Revisions: ask for features, never dates
//
// A [Version] is a revision's date as on the wire. What a revision has is
// one table (version.go), asked through methods, so the rest of troupe
// never compares date strings and a new revision is a new row:
//
//	v := protocol.Negotiate(params.ProtocolVersion) // the client's, or Latest
//	if v.HasStructuredContent() {
//		// outputSchema and structuredContent exist in this session
//	}
//	tool = protocol.ShapeTool(v, tool)     // drop members v does not know
//	res = protocol.ShapeResult(v, res)     // e.g. resource links as text before 2025-06-18
//
// The handshake revisions (2024-11-05 to 2025-11-25) negotiate once in
// initialize. The stateless revision, 2026-07-28, has no initialize: each
// request carries its version, client info and capabilities in _meta
// ([NamesVersion], [ReadStatelessMeta]; [Era] names which of the two eras a request belongs to), and results are decorated with resultType
// and cache hints ([DecorateResult]).
//
// # Messages and errors
//
// messages.go holds the handshake, tools and content types (a [Tool] in
// tools/list, [CallToolParams] and [CallToolResult] for tools/call, the
// [Content] blocks); resources.go, elicitation.go and logging.go the rest
// of what troupe serves or asks. The JSON-RPC envelope is
// github.com/sourcegraph/jsonrpc2's; errors.go names the codes troupe
// answers with ([CodeServerBusy], the 2026-07-28 refusals -32020 to -32022)
// and [NewError] builds one with its data. Every _meta key troupe adds
// starts with [MetaPrefix].
package protocol
