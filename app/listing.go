package app

import (
	"context"
	"fmt"
	"strings"

	"troupe/pins"
	"troupe/protocol"
	"troupe/tools"
)

// ToolList is what a session would see with the App's configuration: the
// tools/list entries, and the state of each downstream server.
type ToolList struct {
	Tools   []protocol.Tool
	Servers []ServerState
	// Held are the downstream tools and prompts held since they changed,
	// as the pins record them (HeldPins): what `troupe tools --accept`
	// would accept. Listing never writes the pins.
	Held []pins.HeldItem
	// PinsErr says why the pins could not be read (a running troupe then
	// holds every downstream tool).
	PinsErr error
}

// ServerState is one downstream server as Tools found it.
type ServerState struct {
	Name string
	// State is downstream.StateReady when it listed its tools,
	// downstream.StateUnauthenticated when troupe's credential for it is
	// missing or refused (Err is the hint), else downstream.StateDown.
	State string
	Tools int // how many tools it listed
	// Exposed is how many of them a session sees (enabled_tools,
	// disabled_tools, tools.allow and tools.deny applied).
	Exposed int
	Err     error // why it is down
}

// Tools connects to each enabled downstream server once, lists its tools
// and closes, then builds the registry a session would see once every
// server is up ("troupe tools"). As Run does, it warns about tools whose
// sandbox profile cannot be enforced here.
func (a *App) Tools(ctx context.Context) (*ToolList, error) {
	cfg := a.config()
	servers := a.probeServers(ctx, cfg)
	reg, err := a.buildRegistry(cfg, servers)
	if err != nil {
		return nil, fmt.Errorf("cannot build the tool registry: %w", err)
	}
	a.warnUnenforceable(cfg, reg)
	list, _ := reg.Page(0, reg.Len())
	out := &ToolList{Tools: list}
	exposed := exposedPerServer(reg)
	for _, s := range servers {
		out.Servers = append(out.Servers, ServerState{Name: s.name, State: s.state, Tools: len(s.tools), Exposed: exposed[s.name], Err: s.err})
	}
	out.Held, out.PinsErr = a.HeldPins(ctx)
	return out, nil
}

// exposedPerServer counts, per downstream server, the tools of reg (what
// sessions see) that it serves.
func exposedPerServer(reg *tools.Registry) map[string]int {
	out := map[string]int{}
	page, _ := reg.Page(0, reg.Len())
	for _, t := range page {
		if e, ok := reg.Lookup(t.Name); ok {
			meta, _ := e.Spec().Meta[tools.MetaSource].(string)
			if server, proxied := strings.CutPrefix(meta, "mcp_servers."); proxied {
				out[server]++
			}
		}
	}
	return out
}
