// Package loadgen drives an MCP server with load and measures it: calls
// per second, latency percentiles, errors by kind, and, when the server is
// a local process, its CPU time per call and its memory. It backs
// "troupe bench", and it works against any MCP server, not only troupe.
//
// The client is built never to be the bottleneck. It speaks raw JSON-RPC:
// a tools/call is a byte template with the id spliced in, and an answer is
// scanned only for its id and for whether it is a JSON-RPC error or a
// result with "isError": true. No MCP library sits in the hot path; each
// caller goroutine keeps its own samples, so callers share nothing but a
// counter.
//
// # Targets
//
// A [Target] is either a command, started as a child process and spoken
// to in newline-delimited JSON-RPC on its stdin and stdout, or the URL of
// a streamable-HTTP endpoint (answers may come as JSON or as SSE). A
// stdio server runs in its own process group, which is killed when the
// run ends; the time from its start to its initialize answer is reported
// as StartupMs.
//
// Target.URLs, instead of URL, names several HTTP endpoints of one
// service, such as the nodes of a troupe cluster, so that it is
// load-tested as a whole: sessions (in every mode) and stateless callers
// are spread over the URLs round-robin, at least one of each a URL, and
// Report.PerURL gives each URL's sessions, calls, errors and latency
// percentiles beside the totals. One URL reports as it always did.
//
// Options.RouteVia sends every call to another URL than the one its
// session was initialized at: with a troupe cluster, a node that does not
// own the session and forwards the call to the node that does. A run with
// it beside one without gives the cost of the hop between nodes.
//
// Over HTTP, Options.Stateless makes the calls without a session, as the
// 2026-07-28 revision does: server/discover once, then every tools/call
// stands alone, its version, client capabilities and client in _meta and
// its version, method and tool in the MCP-Protocol-Version, Mcp-Method and
// Mcp-Name headers. A server that answers server/discover with "method not
// found" or an HTTP 4xx (a 2025 server in its stateless mode, such as
// mcp-go's WithStateLess or go-sdk's Stateless before they learnt
// 2026-07-28) gets the 2025 revisions' stateless calls instead: a plain
// tools/call with no session id and no initialize. Report.Stateless says
// which dialect the calls spoke.
//
// # Modes
//
//   - [ModeThroughput]: Calls calls, Concurrency in flight. Over HTTP the
//     callers are spread round-robin over Sessions sessions.
//   - [ModeSessions]: open Sessions idle HTTP sessions and report the
//     server's RSS growth divided by the sessions (BytesPerSession). RSS
//     moves by pages and with the garbage collector's heap target, so
//     open thousands of sessions for a meaningful figure.
//   - [ModeSoak]: Rate calls a second for Duration, with the latency
//     percentiles, errors and RSS of every Interval, to see drift.
//
// The server's figures come from /proc/PID/stat (user+system CPU, at the
// kernel's 10 ms tick) and /proc/PID/status (VmRSS): for a stdio server
// always, for an HTTP server when Options.PID names it. On systems
// without /proc they are left out.
//
// Every run is bounded: by Options.Timeout overall, by Options.CallTimeout
// per call, and by its count (Calls, Sessions, or Rate×Duration).
//
// A run in ten lines:
//
//	rep, err := loadgen.Run(ctx, loadgen.Options{
//		Target:      loadgen.Target{URL: "http://127.0.0.1:8080/mcp"},
//		Calls:       10000,
//		Concurrency: 32,
//		Sessions:    8,
//		Tool:        "repo.listDir",
//		Args:        json.RawMessage(`{"path":"."}`),
//	})
//	if err != nil {
//		return err
//	}
//	rep.WriteTable(os.Stdout)
//
// Failed calls do not fail the run: they are counted in Report.Errors by
// kind — [KindIsError], "jsonrpc:<code>" ([KindJSONRPC]), [KindTimeout]
// and [KindTransport]. Calls the server refused over one of its limits
// (troupe's -31429, or HTTP 429: [KindRateLimited]) are neither: they are
// counted in Report.RateLimited.
package loadgen
