package actors

import (
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"troupe/actors/transport"
	"troupe/protocol"
	"troupe/spool"
)

// callerStores keeps the spooled output of 2026-07-28 HTTP requests, one
// spool.Store per caller. Each such request runs in a hidden session that
// ends with its answer, so a store of the session's own would be gone
// before the client could follow the result's resource_link. The caller
// is the request's credential (the sha256 of its bearer token; without
// authentication every client is the same caller): the hidden sessions of
// one caller share its store, and no other caller can read it.
//
// A store is made on a caller's first call, held by each hidden session
// that uses it (until that session ends), and removed once nobody holds
// it and it has not been used for the idle timeout (http.
// session_idle_timeout): one timer sweeps every store, none per caller.
// Its bytes are charged to the server's spool.Budget like every session's
// (Limits.Shared). The Host removes what is left when it closes.
//
// It is shared by the session actors of every caller, so it is guarded by
// a mutex; nothing slow runs under it (stores are closed after it is
// released).
type callerStores struct {
	dir    string       // SessionOptions.SpoolDir
	limits spool.Limits // SessionOptions.Spool, with the server's budget
	idle   time.Duration
	log    *slog.Logger
	// node is this cluster member's id, which the output ids of its calls
	// start with (spool.NodeOutputID), so that any node's front can send a
	// read of their links here; "" outside a cluster. Set once the node
	// has joined (Host.SetNode), before HTTP is served.
	node atomic.Pointer[string]

	mu     sync.Mutex
	stores map[[32]byte]*callerStore
	sweep  *time.Timer // the next sweep, while stores exist
	closed bool
}

// callerStore is one caller's store and who uses it.
type callerStore struct {
	store *spool.Store
	users int       // hidden sessions holding it
	last  time.Time // when it was last taken or given back
}

func newCallerStores(dir string, limits spool.Limits, idle time.Duration, log *slog.Logger) *callerStores {
	c := &callerStores{dir: dir, limits: limits, idle: idle, log: log}
	c.node.Store(new(string))
	return c
}

// self is the cluster member the output ids of these stores name; "" for
// one process.
func (c *callerStores) self() string { return *c.node.Load() }

// acquire returns caller's store, made first when create is set (a call
// that may write output; a read of a caller that has none makes none),
// and counts the session as its user until release. nil when there is no
// store to give (none and !create, or the Host is closing).
func (c *callerStores) acquire(caller [32]byte, create bool) *spool.Store {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.closed {
		return nil
	}
	cs := c.stores[caller]
	if cs == nil {
		if !create {
			return nil
		}
		cs = &callerStore{store: spool.NewStore(c.dir, c.limits)}
		if c.stores == nil {
			c.stores = map[[32]byte]*callerStore{}
		}
		c.stores[caller] = cs
		c.armSweep()
	}
	cs.users++
	cs.last = time.Now()
	return cs.store
}

// release ends one session's use of caller's store; the idle timeout
// counts from the last release.
func (c *callerStores) release(caller [32]byte) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if cs := c.stores[caller]; cs != nil && cs.users > 0 {
		cs.users--
		cs.last = time.Now()
	}
}

// armSweep starts the sweep timer when stores exist and none runs. Called
// with mu held.
func (c *callerStores) armSweep() {
	if c.sweep != nil || len(c.stores) == 0 || c.closed {
		return
	}
	c.sweep = time.AfterFunc(max(c.idle/4, time.Millisecond), c.sweepIdle)
}

// sweepIdle removes the stores nobody holds that have been idle for the
// timeout; a store expires between idle and 1¼ idle after its last use.
func (c *callerStores) sweepIdle() {
	c.mu.Lock()
	c.sweep = nil
	var expired []*spool.Store
	for caller, cs := range c.stores {
		if cs.users == 0 && time.Since(cs.last) >= c.idle {
			expired = append(expired, cs.store)
			delete(c.stores, caller)
		}
	}
	if len(c.stores) == 0 {
		c.stores = nil // a map keeps its buckets after its entries go
	}
	c.armSweep()
	c.mu.Unlock()
	for _, s := range expired {
		c.remove(s, "idle")
	}
}

// close removes every store and stops the sweep: the Host is closing and
// its sessions have ended. Later acquires get nil.
func (c *callerStores) close() {
	c.mu.Lock()
	c.closed = true
	if c.sweep != nil {
		c.sweep.Stop()
		c.sweep = nil
	}
	stores := c.stores
	c.stores = nil
	c.mu.Unlock()
	for _, cs := range stores {
		c.remove(cs.store, "closing")
	}
}

func (c *callerStores) remove(s *spool.Store, why string) {
	if err := s.Close(); err != nil {
		c.log.Warn("removing a caller's spooled output", "reason", why, "err", err)
	}
}

// count is how many callers have a store (for tests).
func (c *callerStores) count() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return len(c.stores)
}

// Output implements SessionView: the store this session's calls spool
// into and its resources are read from. A stateless-era request over HTTP
// uses its caller's (callerStores), anything else the session's own.
// create makes one when there is none yet (for a call); reads make none.
func (s *session) Output(req *transport.Request, create bool) (*spool.Store, bool) {
	if s.store != nil {
		return s.store, s.storeShared
	}
	if req.Credential != nil && req.Era == protocol.EraStateless && s.opts.callers != nil {
		if st := s.opts.callers.acquire(*req.Credential, create); st != nil {
			s.store, s.storeShared, s.credential = st, true, req.Credential
			return st, true
		}
	}
	if create {
		s.store = spool.NewStore(s.opts.SpoolDir, s.opts.Spool)
	}
	return s.store, false
}

// dropStore lets go of the session's store as the session ends: its own
// is removed, its caller's is only released (other requests of the same
// caller may read it).
func (s *session) dropStore() {
	switch {
	case s.store == nil:
	case s.storeShared:
		s.opts.callers.release(*s.credential)
	default:
		if err := s.store.Close(); err != nil {
			s.log.Warn("removing spooled output", "err", err)
		}
	}
	s.store = nil
}
