// Package actors is troupe's runtime: every MCP session, tool invocation
// and approval is a protoactor-go actor under a supervisor, and Host is
// the facade the transports and the application use.
//
// The tree (ARCHITECTURE.md has the whole story):
//
//	server                 Host's top actor; one per process. Sessions are
//	┆                      spawned from the root under sessionGuardian, and
//	┆                      tracked by the server, not parented by it.
//	└── session            one per MCP session, stdio or HTTP: negotiated
//	    │                  version, capabilities, log level, in-flight calls;
//	    │                  its transport (package transport's seam;
//	    │                  stdio, httptransport) is a value it owns
//	    └── invoker        runs one tools/call at a time; reused for the
//	        │              session's next call (startCall)
//	        └── approval   one per pending approval
//
// A call costs a handful of messages: the request reaches the session
// (from the stdio read loop, or from the HTTP front), the session hands it
// to an idle invoker, the tool runs in a goroutine the invocation owns,
// which answers the session itself, and the session writes the answer
// through its transport. No actor blocks inside Receive.
//
// Cancellation and deadlines stop actors: a cancelled call's invoker is
// stopped, and its Stopping cancels the tool's context, which kills the
// call's programs. Each parent supervises its children with its own
// HandleFailure: a panicking approval or invoker becomes an isError result
// carrying a correlation id (the stack goes to the log), a tool's panic is
// recovered in its goroutine and answered the same way, and a panicking
// session is resumed after its request is answered with an internal error,
// so one bad call never ends a session and one bad session never ends the
// server.
//
// Timers are plain time.AfterFunc callbacks that Send a message to the
// actor: protoactor's SetReceiveTimeout has a data race (upstream #1139).
package actors
