// Package app is the troupe server as a program: it turns a loaded
// configuration into a running server and keeps the two in step. The
// troupe command parses flags, sets up logging and stdout, and calls this
// package; everything between "the configuration is loaded" and "the last
// call has finished" happens here.
//
// # A server in ten lines
//
//	cfg, err := config.Load(config.Options{})
//	if err != nil {
//		return err
//	}
//	a, err := app.New(cfg, app.Options{Version: "v1.2.3", Logger: log})
//	if err != nil {
//		return err // a *SetupError: every problem found, and whose fault
//	}
//	defer a.Close()
//	return a.Run(ctx, app.RunOptions{Stdin: os.Stdin, Stdout: os.Stdout})
//
// Run serves until stdin ends (and, with http.listen set, until ctx is
// done), then drains: calls in flight get limits.shutdown_grace to finish.
//
// # New: everything checked before serving
//
// [New] runs, in this order, every check the server makes before it serves
// anything, so that a configuration it refuses never half-starts: the HTTP
// address (never beyond loopback without a token), the workspace (opened as
// a [workspace.Root]), troupe's own files (config, audit log, spool: never
// where a run may write, [config.CheckOwnFiles]), the process sandbox
// ([sandbox.New], which probes the kernel in the background), the tool
// registry (registry.go: first-party tools, docs.fetch, [mcp.<name>]
// command tools, the codex tools; tools.allow and tools.deny) and the sealer of
// approval states for stateless clients. "troupe config check" and "troupe
// tools" call New too, so they refuse exactly what serve refuses; they then
// ask [App.CheckDownstreams] or [App.Tools] instead of running.
//
// # Run: the transports, the downstream servers, the watcher
//
// [App.Run] opens the audit log, makes the actor runtime ([actors.Host]),
// connects to the [mcp_servers] (downstream.go: each connects on its own,
// and the registry is rebuilt when one's tools change), serves stdio and/or
// streamable HTTP (http.go), and watches the configuration file. What
// signals mean is the caller's choice: ctx ending starts the drain, and each
// value on [RunOptions.Reload] reloads the configuration.
//
// # Reload: what changes while serving
//
// [App.Reload] puts a new configuration into force: it rebuilds the
// registry (sessions see notifications/tools/list_changed; calls in flight
// finish with the tools they started with), restarts changed downstream
// servers, and then walks one table (reload.go) of the configuration's
// parts: the log level and the HTTP bearer token change for later requests,
// and every part read only at start that changed is named in one warning.
// A configuration whose tool set is invalid is refused as a whole and the
// last good one stays.
//
// # Observing: metrics, traces, the status page
//
// When anyone can look (http.listen, metrics.listen or tracing.endpoint is
// set), New makes one [observe.Hub] (observe.go), with the tracer of
// tracing.endpoint, and hands it to the sandbox; Run hands it to the actors
// as their Observer, tells it the spool budget and the downstream servers,
// and tells it the tools (their names bound the metrics' tool label) at
// every registry change. /metrics and /status are served on the HTTP
// listener behind its token, or on metrics.listen; the tracer is flushed
// after the last call has ended.
//
// The process-wide settings (stdout reserved for the protocol, the process
// made non-dumpable, the log handler, signals) belong to the command, not
// to this package.
package app
