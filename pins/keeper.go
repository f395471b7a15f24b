package pins

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"time"
)

// Keeper compares servers' listings with their pins and records what it
// saw in its Store. Its methods are safe for concurrent use (a registry
// rebuild and a prompts/list may review at once); a nil *Keeper pins
// nothing and trusts every listing, for code paths that serve no
// downstream server.
type Keeper struct {
	store    Store
	readOnly bool
	now      func() time.Time

	mu  sync.Mutex
	doc *Doc // the pins as last read or written; replaced, never edited
}

// KeeperOptions tune a Keeper. The zero value records what it sees.
type KeeperOptions struct {
	// ReadOnly reviews without writing: `troupe config check` and `troupe
	// tools` without --accept show what a server would do, and leave
	// pinning to the server.
	ReadOnly bool
	// Now is the clock (time.Now when nil).
	Now func() time.Time
}

// NewKeeper is a Keeper of store's pins. It reads them at the first
// Review or Load.
func NewKeeper(store Store, o KeeperOptions) *Keeper {
	now := o.Now
	if now == nil {
		now = time.Now
	}
	return &Keeper{store: store, readOnly: o.ReadOnly, now: now}
}

// Load reads the pins again (the store's Watch said they may have
// changed) and reports whether they differ from those the Keeper had.
func (k *Keeper) Load(ctx context.Context) (bool, error) {
	if k == nil {
		return false, nil
	}
	d, err := k.store.Load(ctx)
	if err != nil {
		return false, err
	}
	k.mu.Lock()
	defer k.mu.Unlock()
	same := k.doc != nil && sameDoc(k.doc, d)
	k.doc = d
	return !same, nil
}

func (k *Keeper) loadLocked(ctx context.Context) error {
	if k.doc != nil {
		return nil
	}
	d, err := k.store.Load(ctx)
	if err != nil {
		return err
	}
	k.doc = d
	return nil
}

// State is what troupe does with one listed tool or prompt.
type State int

const (
	// Trusted: the listing is the pinned version (or was just pinned, at
	// first use): served as listed.
	Trusted State = iota
	// Held: it changed and the server's mode is Hold: not listed, calls
	// refused naming the change.
	Held
	// Asking: it changed and the mode is Ask: listed, and every call asks
	// a person, showing the change.
	Asking
	// Accepted: it changed and the mode is Accept: the change was pinned,
	// and it is served as listed.
	Accepted
)

// String names the state as the status page and `troupe tools` show it.
func (s State) String() string {
	switch s {
	case Held:
		return "held"
	case Asking:
		return "asking"
	case Accepted:
		return "accepted"
	}
	return "trusted"
}

// Verdict is what troupe does with one listed tool or prompt.
type Verdict struct {
	State State
	// Change is what changed since the pinned version (Held, Asking,
	// Accepted).
	Change Change
	// Since is when troupe first saw the changed version (Held, Asking).
	Since time.Time
}

// Review is the outcome of one server's listing: a Verdict for each
// listed name, and the Events to report.
type Review struct {
	Verdicts map[string]Verdict
	// Events are what this listing changed in the pins: at most one of
	// each EventKind, however many names it covers. A listing that only
	// repeats what troupe already knew has none.
	Events []Event
}

// EventKind is what happened to a server's pins.
type EventKind string

// The kinds of events.
const (
	// Pinned: tools or prompts seen for the first time were pinned.
	Pinned EventKind = "pinned"
	// Changed: tools or prompts changed since they were pinned; their
	// server's mode holds them or asks about each call.
	Changed EventKind = "changed"
	// Restored: tools or prompts that had changed are listed as pinned
	// again.
	Restored EventKind = "restored"
	// AcceptedChange: a changed version was pinned, by an operator or by
	// the server's on_change = "accept".
	AcceptedChange EventKind = "accepted"
)

// Event is one change of a server's pins: what the audit log, the
// metrics and the log report.
type Event struct {
	What   EventKind
	Server string
	Kind   Kind
	// Mode is the server's mode (Changed, AcceptedChange by the mode).
	Mode Mode
	// Names are the tools' or prompts' names on their server, sorted.
	Names []string
	// Changes are what changed, by name (Changed, AcceptedChange).
	Changes map[string]Change
	// Hashes are the versions now pinned (Pinned, AcceptedChange) or held
	// (Changed), by name.
	Hashes map[string]string
	// By is who accepted (AcceptedChange): ByOnChange or an operator.
	By string
}

// Message is the event as one log line: what happened, to which of the
// server's tools, and what changed in each.
func (e Event) Message() string {
	var b strings.Builder
	noun := string(e.Kind)
	if len(e.Names) != 1 {
		noun += "s"
	}
	fmt.Fprintf(&b, "%d %s of server %s ", len(e.Names), noun, e.Server)
	switch e.What {
	case Pinned:
		b.WriteString("seen for the first time and pinned")
	case Restored:
		b.WriteString("listed as pinned again")
	case AcceptedChange:
		fmt.Fprintf(&b, "changed and accepted by %s", e.By)
	case Changed:
		switch e.Mode {
		case Ask:
			b.WriteString("changed since they were pinned; every call asks a person until an operator accepts")
		default:
			b.WriteString("changed since they were pinned and are held until an operator accepts")
		}
	}
	b.WriteString(": ")
	for i, n := range e.Names {
		if i > 0 {
			b.WriteString(", ")
		}
		b.WriteString(n)
		if s := e.Changes[n].Summary(); s != "" {
			b.WriteString(" (" + s + ")")
		}
	}
	return b.String()
}

// Review compares the defs server listed (of kind k) with their pins
// under mode, pins what is new, records changed versions and returns a
// Verdict for each. A listing that changes nothing already known writes
// nothing. When the pins cannot be written, the Verdicts still hold what
// changed since the pins troupe had (nothing changed is served), the
// error says why the pins were not kept, and nothing is reported.
func (k *Keeper) Review(ctx context.Context, server string, kind Kind, mode Mode, defs []Def) (Review, error) {
	if k == nil {
		r := Review{Verdicts: make(map[string]Verdict, len(defs))}
		for _, d := range defs {
			r.Verdicts[d.Name] = Verdict{}
		}
		return r, nil
	}
	k.mu.Lock()
	defer k.mu.Unlock()
	if err := k.loadLocked(ctx); err != nil {
		// No pins to compare with: nothing may be trusted as unchanged.
		r := Review{Verdicts: make(map[string]Verdict, len(defs))}
		for _, d := range defs {
			r.Verdicts[d.Name] = Verdict{State: heldState(mode), Change: Unreadable}
		}
		return r, err
	}
	now := k.now()
	// Most listings repeat what the pins say: compared without a copy
	// of the pins, and nothing is written.
	r, changed := review(k.doc, server, kind, mode, defs, now, false)
	if !changed || k.readOnly {
		if k.readOnly {
			r.Events = nil
		}
		return r, nil
	}
	var final Review
	stored, err := k.store.Update(ctx, func(d *Doc) (bool, error) {
		var write bool
		final, write = review(d, server, kind, mode, defs, now, true)
		return write, nil
	})
	if err != nil {
		r.Events = nil
		return r, err
	}
	k.doc = stored
	return final, nil
}

func heldState(m Mode) State {
	if m == Ask {
		return Asking
	}
	return Held
}

// review is Review's comparison; it reports whether d changes (edit:
// d is edited; else d is left as it is and the Verdicts are those the
// edit would give).
func review(d *Doc, server string, kind Kind, mode Mode, defs []Def, now time.Time, edit bool) (Review, bool) {
	r := Review{Verdicts: make(map[string]Verdict, len(defs))}
	events := map[EventKind]*Event{}
	event := func(what EventKind, name, hash string, c *Change, by string) {
		e := events[what]
		if e == nil {
			e = &Event{What: what, Server: server, Kind: kind, Mode: mode, By: by,
				Changes: map[string]Change{}, Hashes: map[string]string{}}
			events[what] = e
		}
		e.Names = append(e.Names, name)
		e.Hashes[name] = hash
		if c != nil {
			e.Changes[name] = *c
		}
	}
	changed := false
	for _, def := range defs {
		hash := def.Hash()
		ent := d.lookup(server, kind, def.Name)
		switch {
		case ent == nil:
			if edit {
				d.server(server).entries(kind)[def.Name] = &Entry{Pinned: Version{Hash: hash, Def: def, Since: now, By: ByFirstUse}}
			}
			r.Verdicts[def.Name] = Verdict{State: Trusted}
			event(Pinned, def.Name, hash, nil, "")
			changed = true
		case ent.Pinned.Hash == hash:
			r.Verdicts[def.Name] = Verdict{State: Trusted}
			if ent.Held != nil {
				if edit {
					ent.Held = nil
				}
				event(Restored, def.Name, hash, nil, "")
				changed = true
			}
		case mode == Accept:
			c := Compare(ent.Pinned.Def, def)
			if edit {
				ent.Pinned, ent.Held = Version{Hash: hash, Def: def, Since: now, By: ByOnChange}, nil
			}
			r.Verdicts[def.Name] = Verdict{State: Accepted, Change: c}
			event(AcceptedChange, def.Name, hash, &c, ByOnChange)
			changed = true
		default:
			c := Compare(ent.Pinned.Def, def)
			since := now
			if ent.Held != nil && ent.Held.Hash == hash {
				since = ent.Held.Since
			} else {
				if edit {
					ent.Held = &Version{Hash: hash, Def: def, Since: now}
				}
				event(Changed, def.Name, hash, &c, "")
				changed = true
			}
			r.Verdicts[def.Name] = Verdict{State: heldState(mode), Change: c, Since: since}
		}
	}
	for _, what := range []EventKind{Pinned, Changed, Restored, AcceptedChange} {
		if e := events[what]; e != nil {
			slices.Sort(e.Names)
			r.Events = append(r.Events, *e)
		}
	}
	return r, changed
}

// ErrNothingHeld is Accept's error when no held version matches.
var ErrNothingHeld = errors.New("nothing is held")

// Accept pins the held versions of server's tools and prompts named name
// (every held one of the server when name is ""), as accepted by by (the
// operator's identity). It returns the events, one per kind; an error
// wrapping ErrNothingHeld when nothing matched. Accept writes even with
// KeeperOptions.ReadOnly: it is the operator's act.
func (k *Keeper) Accept(ctx context.Context, server, name, by string) ([]Event, error) {
	if k == nil {
		return nil, fmt.Errorf("server %s: %w", server, ErrNothingHeld)
	}
	k.mu.Lock()
	defer k.mu.Unlock()
	now := k.now()
	var events []Event
	stored, err := k.store.Update(ctx, func(d *Doc) (bool, error) {
		events = nil
		s := d.Servers[server]
		if s == nil {
			return false, nil
		}
		for _, kind := range []Kind{Tool, Prompt} {
			e := Event{What: AcceptedChange, Server: server, Kind: kind, By: by,
				Changes: map[string]Change{}, Hashes: map[string]string{}}
			for n, ent := range s.entries(kind) {
				if ent.Held == nil || name != "" && n != name {
					continue
				}
				e.Changes[n] = Compare(ent.Pinned.Def, ent.Held.Def)
				e.Hashes[n] = ent.Held.Hash
				e.Names = append(e.Names, n)
				ent.Pinned = Version{Hash: ent.Held.Hash, Def: ent.Held.Def, Since: now, By: by}
				ent.Held = nil
			}
			if len(e.Names) > 0 {
				slices.Sort(e.Names)
				events = append(events, e)
			}
		}
		return len(events) > 0, nil
	})
	if err != nil {
		return nil, err
	}
	k.doc = stored
	if len(events) == 0 {
		what := "server " + server
		if name != "" {
			what += " has no held tool or prompt named " + name
		}
		return nil, fmt.Errorf("%s: %w", what, ErrNothingHeld)
	}
	return events, nil
}

// HeldItem is one held version, for the status page and `troupe tools`.
type HeldItem struct {
	Server string
	Kind   Kind
	Name   string
	Pinned Version
	Held   Version
	Change Change
}

// Held lists the held versions the Keeper knows of, by server, kind and
// name.
func (k *Keeper) Held(ctx context.Context) ([]HeldItem, error) {
	var out []HeldItem
	err := k.eachHeld(ctx, func(server string, kind Kind, name string, ent *Entry) {
		out = append(out, heldItem(server, kind, name, ent))
	})
	slices.SortFunc(out, func(a, b HeldItem) int {
		return strings.Compare(a.Server+"\x00"+string(a.Kind)+"\x00"+a.Name, b.Server+"\x00"+string(b.Kind)+"\x00"+b.Name)
	})
	return out, err
}

// HeldOne is the held version of server's kind named name, if one is
// held: the refusal of a held prompt names its change.
func (k *Keeper) HeldOne(ctx context.Context, server string, kind Kind, name string) (HeldItem, bool, error) {
	var item HeldItem
	found := false
	err := k.eachHeld(ctx, func(s string, kd Kind, n string, ent *Entry) {
		if s == server && kd == kind && n == name {
			item, found = heldItem(s, kd, n, ent), true
		}
	})
	return item, found, err
}

// HeldCounts is how many tools and prompts of each server are held: the
// held gauge, set at every registry build, needs no diff.
func (k *Keeper) HeldCounts(ctx context.Context) (map[string]int, error) {
	counts := map[string]int{}
	err := k.eachHeld(ctx, func(server string, _ Kind, _ string, _ *Entry) { counts[server]++ })
	return counts, err
}

// eachHeld calls f with every held entry of the pins in force, under the
// Keeper's lock and without copying them: f must not edit the entry (the
// Keeper replaces its pins, never edits them).
func (k *Keeper) eachHeld(ctx context.Context, f func(server string, kind Kind, name string, ent *Entry)) error {
	if k == nil {
		return nil
	}
	k.mu.Lock()
	defer k.mu.Unlock()
	if err := k.loadLocked(ctx); err != nil {
		return err
	}
	for server, s := range k.doc.Servers {
		for kind, entries := range map[Kind]map[string]*Entry{Tool: s.Tools, Prompt: s.Prompts} {
			for n, ent := range entries {
				if ent.Held != nil {
					f(server, kind, n, ent)
				}
			}
		}
	}
	return nil
}

// heldItem is a held entry as Held lists it, with its change.
func heldItem(server string, kind Kind, name string, ent *Entry) HeldItem {
	return HeldItem{Server: server, Kind: kind, Name: name, Pinned: ent.Pinned, Held: *ent.Held,
		Change: Compare(ent.Pinned.Def, ent.Held.Def)}
}

// sameDoc reports whether a and b hold the same pins.
func sameDoc(a, b *Doc) bool {
	if len(a.Servers) != len(b.Servers) {
		return false
	}
	for name, s := range a.Servers {
		t := b.Servers[name]
		if t == nil || !sameEntries(s.Tools, t.Tools) || !sameEntries(s.Prompts, t.Prompts) {
			return false
		}
	}
	return true
}

func sameEntries(a, b map[string]*Entry) bool {
	if len(a) != len(b) {
		return false
	}
	for n, e := range a {
		f := b[n]
		if f == nil || e.Pinned.Hash != f.Pinned.Hash || (e.Held == nil) != (f.Held == nil) ||
			e.Held != nil && e.Held.Hash != f.Held.Hash {
			return false
		}
	}
	return true
}
