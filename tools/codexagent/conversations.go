package codexagent

import (
	"container/list"
	"sync"

	"troupe/tools"
)

// maxConversations bounds the conversation table: a long-running troupe
// forgets the least recently used idle conversations beyond it.
const maxConversations = 256

// conversation is what codex-reply needs to continue a thread: the thread
// id (also the conversation id the client sees), the CODEX_HOME holding
// its rollout, the working directory it was started in, and the sandbox
// mode troupe started it with. Codex 0.169 does not restore every
// sandbox on thread/resume (a workspace-write thread comes back with the
// configuration's sandbox), so codex-reply asks for the same one again.
type conversation struct {
	id      string
	cwd     string
	sandbox string // the SandboxMode sent with thread/start; "" for Codex's configuration
	busy    bool   // a turn runs: one turn at a time per conversation
	elem    *list.Element
}

// conversations is the in-memory table of conversations the codex tool
// started. It is owned by one Tools value, never shared between troupe
// processes and never persisted: ids do not survive a restart.
type conversations struct {
	mu    sync.Mutex
	max   int
	byID  map[string]*conversation
	order *list.List // front: most recently used
}

func newConversations(max int) *conversations {
	return &conversations{max: max, byID: map[string]*conversation{}, order: list.New()}
}

// add records a new conversation, busy with its first turn.
func (cs *conversations) add(id, cwd, sandbox string) {
	cs.mu.Lock()
	defer cs.mu.Unlock()
	if c, ok := cs.byID[id]; ok {
		c.busy = true
		cs.order.MoveToFront(c.elem)
		return
	}
	c := &conversation{id: id, cwd: cwd, sandbox: sandbox, busy: true}
	c.elem = cs.order.PushFront(c)
	cs.byID[id] = c
	// Forget the least recently used idle ones; busy ones stay (their
	// turn will release them) even if that leaves the table over its
	// bound for a while.
	for e := cs.order.Back(); e != nil && len(cs.byID) > cs.max; {
		prev := e.Prev()
		if old := e.Value.(*conversation); !old.busy {
			cs.order.Remove(e)
			delete(cs.byID, old.id)
		}
		e = prev
	}
}

// acquire marks conversation id busy and returns a copy of it, or fails
// with not_found (unknown or forgotten) or unavailable (a turn runs).
func (cs *conversations) acquire(id string) (conversation, error) {
	cs.mu.Lock()
	defer cs.mu.Unlock()
	c, err := cs.find(id)
	if err != nil {
		return conversation{}, err
	}
	if c.busy {
		return conversation{}, tools.Errorf(tools.KindUnavailable,
			"codex-reply: conversation %q is still running a turn; wait for it to finish", id)
	}
	c.busy = true
	cs.order.MoveToFront(c.elem)
	return *c, nil
}

// lookup returns a copy of conversation id, or not_found, without
// marking it busy: for previews, before a person is asked.
func (cs *conversations) lookup(id string) (conversation, error) {
	cs.mu.Lock()
	defer cs.mu.Unlock()
	c, err := cs.find(id)
	if err != nil {
		return conversation{}, err
	}
	return *c, nil
}

// find is conversation id, or not_found; callers hold cs.mu.
func (cs *conversations) find(id string) (*conversation, error) {
	c, ok := cs.byID[id]
	if !ok {
		return nil, tools.Errorf(tools.KindNotFound,
			"codex-reply: no conversation %q: conversation ids come from this troupe's codex tool and do not survive a restart", id)
	}
	return c, nil
}

// release ends a turn of conversation id.
func (cs *conversations) release(id string) {
	cs.mu.Lock()
	defer cs.mu.Unlock()
	if c, ok := cs.byID[id]; ok {
		c.busy = false
	}
}

// len is the number of conversations kept.
func (cs *conversations) len() int {
	cs.mu.Lock()
	defer cs.mu.Unlock()
	return len(cs.byID)
}
