package app

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"slices"

	"troupe/downstream"
	"troupe/identity"
	"troupe/pins"
	"troupe/protocol"
	"troupe/tools"
)

// The downstream servers' prompts and completions through the gateway:
// prompts named like their servers' tools, filtered by [prompts], routed
// back to their servers by name; completions routed by their ref.

func (g *gateway) listPrompts(ctx context.Context, params json.RawMessage) (any, error) {
	policy, grant := g.policy(), grantOf(ctx)
	return g.mergedPage(ctx, params, mergedList{key: "prompts",
		list: func(s gatewayServer, ctx context.Context, cursor string) (downstream.Page, error) {
			return s.src.ListPrompts(ctx, cursor)
		},
		expose: func(earlier []gatewayServer, s gatewayServer, first bool, items []json.RawMessage) []json.RawMessage {
			return g.exposePrompts(ctx, earlier, s, first, items, policy, grant)
		}})
}

// exposePrompts renames one page of s's prompts for troupe's clients,
// leaving out those the policy hides and those an earlier server (in name
// order) already offers under the same name, with a warning. first says
// the page is s's first, which starts its known names anew. A prompt the
// caller's grant does not allow is known (for routing) but not shown.
//
// Each page is reviewed against the prompts' pins (the server's
// on_change): a prompt that changed since it was pinned is held, left out
// of the list (with on_change = "ask" too: there is no call to ask
// about), though known, so that no other server takes its name and
// prompts/get names the change (refuseHeld).
func (g *gateway) exposePrompts(ctx context.Context, earlier []gatewayServer, s gatewayServer, first bool, items []json.RawMessage, policy tools.Policy, grant *identity.Grant) []json.RawMessage {
	var verdicts map[string]pins.Verdict
	if g.reviewPrompts != nil {
		var defs []pins.Def
		for _, raw := range items {
			if d, err := pins.PromptDef(raw); err == nil && policy.Visible(s.expose(d.Name)) {
				defs = append(defs, d)
			}
		}
		if len(defs) > 0 {
			verdicts = g.reviewPrompts(ctx, s.name, defs)
		}
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	if first || g.known[s.name] == nil {
		g.known[s.name] = map[string]bool{}
	}
	known := g.known[s.name]
	var out []json.RawMessage
	for _, raw := range items {
		var obj map[string]json.RawMessage
		var name string
		if json.Unmarshal(raw, &obj) != nil || json.Unmarshal(obj["name"], &name) != nil || name == "" {
			g.log.Warn("downstream prompt left out: not a prompt", "server", s.name)
			continue
		}
		exposed := s.expose(name)
		if !policy.Visible(exposed) {
			continue
		}
		if i := slices.IndexFunc(earlier, func(e gatewayServer) bool { return g.known[e.name][exposed] }); i >= 0 {
			g.log.Warn("prompt name collision: the downstream prompt is left out", "prompt", exposed,
				"kept", fmt.Sprintf("[mcp_servers.%q]", earlier[i].name), "dropped", fmt.Sprintf("[mcp_servers.%q]", s.name))
			continue
		}
		if len(known) < maxKnownPrompts {
			known[exposed] = true
		}
		if st := verdicts[name].State; !grant.Allows(exposed) || st == pins.Held || st == pins.Asking {
			continue
		}
		if s.prefix != "" {
			obj["name"], _ = json.Marshal(exposed)
			b, err := json.Marshal(obj)
			if err != nil {
				continue
			}
			raw = b
		}
		out = append(out, raw)
	}
	return out
}

// route finds the server of an exposed prompt name: the first (in name
// order) that listed it, else the candidates whose prefix it has, to be
// asked in name order.
func (g *gateway) route(exposed string) []gatewayServer {
	var candidates []gatewayServer
	servers := g.servers()
	g.mu.Lock()
	defer g.mu.Unlock()
	for _, s := range servers {
		if _, ok := s.owns(exposed); !ok {
			continue
		}
		if g.known[s.name][exposed] {
			return []gatewayServer{s}
		}
		candidates = append(candidates, s)
	}
	return candidates
}

func (g *gateway) getPrompt(ctx context.Context, params json.RawMessage) (any, error) {
	var p struct {
		Name      string          `json:"name"`
		Arguments json.RawMessage `json:"arguments"`
	}
	if err := json.Unmarshal(params, &p); err != nil {
		return nil, tools.Errorf(tools.KindInvalidArgument, "invalid params: %v", err)
	}
	if p.Name == "" {
		return nil, tools.Errorf(tools.KindInvalidArgument, "name is required")
	}
	if !g.policy().Visible(p.Name) || !grantOf(ctx).Allows(p.Name) {
		return nil, tools.Errorf(tools.KindInvalidArgument, "unknown prompt: %s", p.Name)
	}
	if err := g.refuseHeld(ctx, p.Name); err != nil {
		return nil, err
	}
	return g.ask(ctx, p.Name, "prompt", func(s gatewayServer, remote string) (json.RawMessage, error) {
		return s.src.GetPrompt(ctx, remote, p.Arguments)
	})
}

// refuseHeld refuses a prompt that a server it may be routed to holds
// (it changed since it was pinned), with a message naming the change and
// how an operator accepts it.
func (g *gateway) refuseHeld(ctx context.Context, exposed string) error {
	if g.heldPrompt == nil {
		return nil
	}
	for _, s := range g.route(exposed) {
		remote, _ := s.owns(exposed)
		if msg := g.heldPrompt(ctx, s.name, exposed, remote); msg != "" {
			return tools.Errorf(tools.KindInvalidArgument, "%s", msg)
		}
	}
	return nil
}

// ask asks the servers that may own exposed, in order, until one knows
// it: a server that answers invalid params (unknown name) or is not
// connected passes to the next.
func (g *gateway) ask(ctx context.Context, exposed, what string, f func(gatewayServer, string) (json.RawMessage, error)) (any, error) {
	var last error
	for _, s := range g.route(exposed) {
		remote, _ := s.owns(exposed)
		res, err := f(s, remote)
		if err == nil {
			return res, nil
		}
		var rpc *downstream.RPCError
		if ctx.Err() != nil || (errors.As(err, &rpc) && rpc.Code != protocol.CodeInvalidParams) {
			return nil, err
		}
		last = err
	}
	var rpc *downstream.RPCError
	if errors.As(last, &rpc) {
		return nil, last
	}
	return nil, tools.Errorf(tools.KindInvalidArgument, "unknown %s: %s", what, exposed)
}

func (g *gateway) complete(ctx context.Context, params json.RawMessage) (any, error) {
	var p map[string]json.RawMessage
	if err := json.Unmarshal(params, &p); err != nil {
		return nil, tools.Errorf(tools.KindInvalidArgument, "invalid params: %v", err)
	}
	delete(p, "_meta")
	delete(p, "stateless") // troupe's, not the server's
	var ref struct {
		Type string `json:"type"`
		Name string `json:"name"`
		URI  string `json:"uri"`
	}
	if err := json.Unmarshal(p["ref"], &ref); err != nil {
		return nil, tools.Errorf(tools.KindInvalidArgument, "ref must be an object")
	}
	switch ref.Type {
	case "ref/prompt":
		if ref.Name == "" || !g.policy().Visible(ref.Name) || !grantOf(ctx).Allows(ref.Name) {
			return nil, tools.Errorf(tools.KindInvalidArgument, "unknown prompt: %s", ref.Name)
		}
		if err := g.refuseHeld(ctx, ref.Name); err != nil {
			return nil, err
		}
		return g.ask(ctx, ref.Name, "prompt", func(s gatewayServer, remote string) (json.RawMessage, error) {
			var r map[string]json.RawMessage
			_ = json.Unmarshal(p["ref"], &r)
			r["name"], _ = json.Marshal(remote)
			q := maps.Clone(p)
			q["ref"], _ = json.Marshal(r)
			b, err := json.Marshal(q)
			if err != nil {
				return nil, err
			}
			return s.src.Complete(ctx, b)
		})
	case "ref/resource":
		// Resource templates keep their servers' URIs: the server that
		// listed the template is asked, else the servers in name order
		// until one completes it.
		b, err := json.Marshal(p)
		if err != nil {
			return nil, err
		}
		var last error
		for _, s := range usableOnly(ctx, g.templateRoute(ref.URI)) {
			res, err := s.src.Complete(ctx, b)
			if err == nil {
				return res, nil
			}
			if ctx.Err() != nil {
				return nil, err
			}
			last = err
		}
		var rpc *downstream.RPCError
		if errors.As(last, &rpc) {
			return nil, last
		}
		return nil, tools.Errorf(tools.KindInvalidArgument, "unknown resource template: %s", ref.URI)
	}
	return nil, tools.Errorf(tools.KindInvalidArgument, "ref.type must be ref/prompt or ref/resource")
}

// templateRoute is the servers to ask about template tmpl: the first that
// listed it, else all in name order.
func (g *gateway) templateRoute(tmpl string) []gatewayServer {
	servers := g.servers()
	g.mu.Lock()
	defer g.mu.Unlock()
	for _, s := range servers {
		if _, ok := g.templates[s.name][tmpl]; ok {
			return []gatewayServer{s}
		}
	}
	return servers
}
