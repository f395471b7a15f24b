package downstream

import (
	"context"
	"time"
)

// AwaitStartup waits until each of servers has ended its first attempt to
// connect (its tools are listed, or it failed and will retry), for at most
// wait, or until ctx ends. It returns the names of the servers still
// connecting then, in the order given.
//
// Clients that list tools once (Codex) see only what troupe lists when
// they ask, and Codex sends its first model request about 0.85 s after it
// starts its MCP servers, whether they have answered or not. A server
// answer held for a slow downstream therefore hides troupe's own tools
// from that request; an answer given at once hides the slow server's tools
// from such a client for good (others get them with list_changed). wait is
// that trade-off, made by the operator (limits.mcp_servers_startup_wait):
// short enough for troupe's own tools, long enough for the servers that
// start quickly.
func AwaitStartup(ctx context.Context, servers []*Server, wait time.Duration) []string {
	timer := time.NewTimer(wait)
	defer timer.Stop()
	for i, d := range servers {
		select {
		case <-d.started:
		case <-timer.C:
			return pending(servers[i:])
		case <-ctx.Done():
			return pending(servers[i:])
		}
	}
	return nil
}

// pending names the servers that have not ended their first attempt.
func pending(servers []*Server) []string {
	var names []string
	for _, d := range servers {
		select {
		case <-d.started:
		default:
			names = append(names, d.name)
		}
	}
	return names
}
