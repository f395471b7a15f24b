// Package actors is troupe's runtime: every connection, MCP session, tool
// invocation and executor is a protoactor-go actor, supervised by its parent.
//
// The tree, for one stdio client:
//
//	server                    (Host's top actor; one per process)
//	└── connection            owns the framing stream and jsonrpc2 read loop
//	    └── session           negotiated version, capabilities, log level, in-flight calls
//	        └── invocation    one per tools/call: validation, deadline, result mapping
//	            └── executor  runs the tool; its stop cancels the tool's work
//
// Messages flow down the tree (connection → session → invocation →
// executor) and replies flow back up as messages; no actor blocks inside
// Receive. Each parent supervises its children with its own HandleFailure:
// a panicking executor or invocation becomes an isError result carrying a
// correlation id (the stack goes to the log), and a panicking session is
// resumed after its request is answered with an internal error, so one bad
// call never ends a session and one bad session never ends the server.
//
// Timers are plain time.AfterFunc callbacks that Send a message to the
// actor: protoactor's SetReceiveTimeout has a data race (upstream #1139).
package actors
