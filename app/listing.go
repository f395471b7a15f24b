package app

import (
	"context"
	"fmt"

	"troupe/protocol"
)

// ToolList is what a session would see with the App's configuration: the
// tools/list entries, and the state of each downstream server.
type ToolList struct {
	Tools   []protocol.Tool
	Servers []ServerState
}

// ServerState is one downstream server as Tools found it.
type ServerState struct {
	Name  string
	State string // actors.StateReady when it listed its tools, else actors.StateDown
	Tools int    // how many tools it listed
	Err   error  // why it is down
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
	for _, s := range servers {
		out.Servers = append(out.Servers, ServerState{Name: s.name, State: s.state, Tools: len(s.tools), Err: s.err})
	}
	return out, nil
}
