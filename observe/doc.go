// Package observe lets operators see inside a running troupe: Prometheus
// metrics, OpenTelemetry traces and the live view behind the status page.
//
// One value, the [Hub], watches everything. The host reports to it as its
// actors.Observer (sessions, requests, calls and their states, approvals,
// audit batches, downstream servers), the sandbox as its
// sandbox.StartObserver, the HTTP handler through HTTPRefused. From those
// reports the Hub keeps three things:
//
//   - Metrics, in its own prometheus.Registry (never the global one), which
//     /metrics serves. Every label value comes from a bounded set: tool
//     names from the registry (SetTools; any other name is "unknown", and
//     the series of a tool that left it are deleted), fixed
//     lists for transports, eras, outcomes, profiles and states, and the
//     configured downstream servers. Session ids, correlation ids and
//     arguments never become labels: each distinct value would be a new
//     time series, forever.
//   - The live view: the sessions, the calls in flight with their state,
//     the downstream servers and the last 50 audit records, copied out by
//     Snapshot for the status page.
//   - Trace spans, when Options.Tracer is set (package observe/tracing):
//     a span per call, its parent the client's span from the call's _meta,
//     with a child for the approval wait, and a span per other request.
//
// Recording a call is on the path of every call, so it is cheap (about a
// microsecond with tracing off, BenchmarkRecordCall): per-tool metric
// children are looked up once in SetTools, the live view is one map under
// one mutex, and the gauges of the live view are computed at scrape time.
package observe
