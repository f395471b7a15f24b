package cluster

import (
	"log/slog"
	"net/http"
	"sync/atomic"

	"github.com/asynkron/protoactor-go/actor"

	"troupe/cluster/wire"
)

// tunnelName is the name of every node's tunnel actor: fronts address it
// by the owner's remote address alone.
const tunnelName = "troupe-tunnel"

// frontLost tells the tunnel actor that a front's node is gone (its
// remote endpoint ended): the requests it forwarded are stopped.
// Sent by the Node, from the actor system's event stream.
type frontLost struct{ address string }

// tunnel is the actor that receives what other nodes send this one: a
// Forward starts an ownerRequest child (keyed by the front's stream actor),
// Ack and Cancel reach that child, Hello is answered with this node's
// config fingerprint and the members it sees.
type tunnel struct {
	handler *atomic.Pointer[http.Handler] // nil until the node serves (Node.Serve)
	self    string
	print   map[string]string
	members func() []string // the members this node sees
	log     *slog.Logger

	requests map[string]*actor.PID // by key (the front's stream actor)
	keys     map[string]string     // child id → key
}

// keyOf names a front's stream actor.
func keyOf(pid *actor.PID) string { return pid.GetAddress() + "/" + pid.GetId() }

// Receive implements actor.Actor.
func (t *tunnel) Receive(ctx actor.Context) {
	switch m := ctx.Message().(type) {
	case *actor.Started:
		t.requests, t.keys = map[string]*actor.PID{}, map[string]string{}
	case *wire.Forward:
		t.forward(ctx, m)
	case *wire.Ack:
		if pid, ok := t.requests[m.GetKey()]; ok {
			ctx.Send(pid, m)
		}
	case *wire.Cancel:
		if pid, ok := t.requests[m.GetKey()]; ok {
			ctx.Stop(pid)
		}
	case *frontLost:
		for key, pid := range t.requests {
			if front, _, _ := cutKey(key); front == m.address {
				ctx.Stop(pid)
			}
		}
	case *actor.Terminated:
		if key, ok := t.keys[m.GetWho().GetId()]; ok {
			delete(t.keys, m.GetWho().GetId())
			delete(t.requests, key)
		}
	case *wire.Hello:
		var members []string
		if t.members != nil {
			members = t.members()
		}
		ctx.Respond(&wire.Fingerprint{Member: t.self, Sections: t.print, Members: members})
	}
}

func (t *tunnel) forward(ctx actor.Context, m *wire.Forward) {
	front := ctx.Sender()
	if front == nil {
		return // nobody to answer
	}
	h := t.handler.Load()
	if h == nil {
		// Joined but not serving yet: the same answer as a node starting up.
		ctx.Send(front, &wire.Part{Seq: 1, Status: http.StatusServiceUnavailable, End: true,
			Headers: []*wire.Header{{Name: "Retry-After", Values: []string{"1"}}}})
		return
	}
	key := keyOf(front)
	if _, dup := t.requests[key]; dup {
		return // a front's stream actor forwards once
	}
	child := ctx.Spawn(actor.PropsFromProducer(func() actor.Actor {
		return &ownerRequest{fwd: m, front: front, handler: *h, log: t.log}
	}))
	t.requests[key] = child
	t.keys[child.GetId()] = key
}

// cutKey splits a key into the front's address and its actor's id.
func cutKey(key string) (address, id string, ok bool) {
	for i := 0; i < len(key); i++ {
		if key[i] == '/' {
			return key[:i], key[i+1:], true
		}
	}
	return "", "", false
}
