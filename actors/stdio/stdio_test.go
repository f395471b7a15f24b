package stdio

import (
	"bufio"
	"encoding/json"
	"io"
	"strings"
	"testing"
	"time"

	"github.com/asynkron/protoactor-go/actor"
	"github.com/sourcegraph/jsonrpc2"

	"troupe/actors/transport"
)

// echoSession is a minimal session for the transport: it answers every
// request with its method as the result, and records the input's end.
type echoSession struct {
	t     *Transport
	ended chan struct{}
}

func (e *echoSession) Receive(ctx actor.Context) {
	switch msg := ctx.Message().(type) {
	case *actor.Started:
		e.t.Start(ctx, e)
	case *transport.Inbound:
		e.Handle(ctx, msg.Request)
	case *actor.Stopping:
		e.t.Stopping()
	case *actor.Stopped:
		e.t.Stopped()
	default:
		e.t.Receive(ctx, e, msg)
	}
}

func (e *echoSession) Handle(_ actor.Context, req *transport.Request) {
	if req.Notif {
		return
	}
	result := json.RawMessage(`"` + req.Method + `"`)
	e.t.Send(&transport.Outbound{Message: &jsonrpc2.Response{ID: req.ID, Result: &result}})
}

func (e *echoSession) InputEnded(ctx actor.Context) {
	close(e.ended)
	ctx.Stop(ctx.Self())
}

func (e *echoSession) MaxInFlight() int { return 4 }

// The stdio transport reads framed requests, hands them to its session in
// order, writes the answers as lines, reports the input's end, and closes
// the output when the session stops.
func TestStdioTransport(t *testing.T) {
	system := actor.NewActorSystem()
	inR, inW := io.Pipe()
	outR, outW := io.Pipe()
	done := make(chan struct{})
	tr := New(inR, outW, done, Options{MaxLineBytes: 1 << 16})
	s := &echoSession{t: tr, ended: make(chan struct{})}
	system.Root.Spawn(actor.PropsFromProducer(func() actor.Actor { return s }))

	lines := bufio.NewScanner(outR)
	go func() {
		io.WriteString(inW, `{"jsonrpc":"2.0","id":1,"method":"first"}`+"\n"+`not json`+"\n"+`{"jsonrpc":"2.0","id":"b","method":"second"}`+"\n")
		inW.Close()
	}()
	var got []string
	for lines.Scan() {
		got = append(got, lines.Text())
	}
	// The bad line is answered by the stream at once, the requests by the
	// session after it: only the answers' order among themselves is fixed.
	all := strings.Join(got, "\n")
	if len(got) != 3 || !strings.Contains(all, `"code":-32700`) ||
		strings.Index(all, `"result":"first"`) > strings.Index(all, `"result":"second"`) ||
		!strings.Contains(all, `"result":"first"`) {
		t.Fatalf("lines %q", got)
	}
	select {
	case <-s.ended:
	case <-time.After(5 * time.Second):
		t.Fatal("the input's end was not reported")
	}
	select {
	case <-done:
	case <-time.After(5 * time.Second):
		t.Fatal("Stopped did not close done")
	}
	system.Shutdown()
}
