package actors

import (
	"sync"
	"sync/atomic"
	"time"

	"github.com/asynkron/protoactor-go/actor"

	"troupe/redact"
)

// workerPool is the actor.Dispatcher every troupe actor runs on, and the
// pool tool calls run on. It runs a function on an idle worker goroutine
// when there is one and starts a new worker when there is none.
//
// protoactor's default dispatcher starts a fresh goroutine each time a
// mailbox gets work. A fresh goroutine has a small stack, and a message's
// path through troupe (JSON, schema validation, logging) is deep: in
// profiles of a busy stdio session a quarter of the CPU went to growing
// and copying those stacks. Workers keep their grown stacks from run to
// run. A worker never waits for a busy one: scheduling is never blocked,
// so an actor that is slow to return cannot stall another, exactly as with
// goroutine-per-run.
//
// Idle workers end after idleWorker, so a burst does not leave its peak
// number of goroutines behind, and all of them end at close.
type workerPool struct {
	work       chan func() // unbuffered: a send succeeds only if a worker is idle
	quit       chan struct{}
	closeOnce  sync.Once
	throughput int
}

// idleWorker is how long a worker waits for a mailbox before it ends.
const idleWorker = 2 * time.Second

// mailboxThroughput is how many messages a mailbox run handles before it
// yields its worker (protoactor's default).
const mailboxThroughput = 300

func newWorkerPool() *workerPool {
	return &workerPool{work: make(chan func()), quit: make(chan struct{}), throughput: mailboxThroughput}
}

// Schedule implements actor.Dispatcher.
func (p *workerPool) Schedule(run func()) {
	select {
	case p.work <- run:
	default:
		go p.worker(run)
	}
}

// Throughput implements actor.Dispatcher.
func (p *workerPool) Throughput() int { return p.throughput }

func (p *workerPool) worker(run func()) {
	idle := time.NewTimer(idleWorker)
	defer idle.Stop()
	for {
		run()
		idle.Reset(idleWorker)
		select {
		case run = <-p.work:
		case <-idle.C:
			return
		case <-p.quit:
			return
		}
	}
}

// close makes idle workers end; busy ones end when their run returns.
// Mailboxes scheduled afterwards still run, each on its own goroutine.
func (p *workerPool) close() {
	p.closeOnce.Do(func() { close(p.quit) })
}

// newHostDeps makes the dependencies a Host's actors share. The options
// every actor gets are made here once.
func newHostDeps(secrets *redact.Live, deliveries *atomic.Int64) *hostDeps {
	d := &hostDeps{secrets: secrets, pool: newWorkerPool()}
	middleware := []actor.ReceiverMiddleware{capturePanics}
	var counting []actor.PropsOption
	if deliveries != nil {
		middleware = append(middleware, countDeliveries(deliveries))
		counting = append(counting, actor.WithReceiverMiddleware(countDeliveries(deliveries)))
	}
	d.propsOpts = []actor.PropsOption{actor.WithReceiverMiddleware(middleware...), actor.WithDispatcher(d.pool)}
	d.sessionOpts = append([]actor.PropsOption{actor.WithMailbox(actor.UnboundedLockfree()), actor.WithDispatcher(d.pool)}, counting...)
	d.invokerProps = d.props(func() actor.Actor { return &invoker{} })
	return d
}

// sessionProps are the props of sessions, which live as long as a client
// and are idle most of the time. Their mailbox is a linked queue that
// holds nothing while empty, where the default one keeps a ring of slots
// (about 220 bytes an actor) for good. They have no receiver middleware:
// protoactor gives an actor with middleware a context of extras (about
// 180 bytes) for good, so a session records its panics' stacks itself
// (session.Receive defers rethrowWithStack).
func (d *hostDeps) sessionProps(producer actor.Producer, opts ...actor.PropsOption) *actor.Props {
	return actor.PropsFromProducer(producer, append(opts, d.sessionOpts...)...)
}

// props are the Props of every other troupe actor: its producer, run by
// the Host's worker pool, with panics recorded (capturePanics) before the
// supervisor sees them.
func (d *hostDeps) props(producer actor.Producer, opts ...actor.PropsOption) *actor.Props {
	if len(opts) == 0 {
		return actor.PropsFromProducer(producer, d.propsOpts...)
	}
	return actor.PropsFromProducer(producer, append(opts, d.propsOpts...)...)
}

// countDeliveries is receiver middleware that counts every message an
// actor receives, system messages included: the hop budget's measure.
func countDeliveries(n *atomic.Int64) actor.ReceiverMiddleware {
	return func(next actor.ReceiverFunc) actor.ReceiverFunc {
		return func(c actor.ReceiverContext, env *actor.MessageEnvelope) {
			n.Add(1)
			next(c, env)
		}
	}
}
