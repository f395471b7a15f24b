package pins

import (
	"context"
	"errors"
	"fmt"
)

// ErrChangedAgain is AcceptVersion's error when the held version is no
// longer the one the operator was shown: the server changed it again
// since, and the operator must look at the new change first.
var ErrChangedAgain = errors.New("it changed again since it was shown")

// AcceptVersion pins the held version of server's tool or prompt (kind k)
// named name, as accepted by by, but only when its hash is still hash:
// the status page accepts exactly the version it showed. It returns the
// event; an error wrapping ErrNothingHeld when nothing of that name is
// held, ErrChangedAgain when what is held now is another version. The
// check and the write are one Store.Update, so a listing recorded by
// another process between them cannot slip in.
func (k *Keeper) AcceptVersion(ctx context.Context, server string, kind Kind, name, hash, by string) ([]Event, error) {
	what := fmt.Sprintf("%s %s of server %s", kind, name, server)
	if k == nil {
		return nil, fmt.Errorf("%s: %w", what, ErrNothingHeld)
	}
	k.mu.Lock()
	defer k.mu.Unlock()
	now := k.now()
	var events []Event
	var refusal error
	stored, err := k.store.Update(ctx, func(d *Doc) (bool, error) {
		events, refusal = nil, nil
		ent := d.lookup(server, kind, name)
		switch {
		case ent == nil || ent.Held == nil:
			refusal = fmt.Errorf("%s: %w", what, ErrNothingHeld)
			return false, nil
		case ent.Held.Hash != hash:
			refusal = fmt.Errorf("%s: %w", what, ErrChangedAgain)
			return false, nil
		}
		c := Compare(ent.Pinned.Def, ent.Held.Def)
		events = []Event{{What: AcceptedChange, Server: server, Kind: kind, By: by, Names: []string{name},
			Changes: map[string]Change{name: c}, Hashes: map[string]string{name: hash}}}
		ent.Pinned = Version{Hash: hash, Def: ent.Held.Def, Since: now, By: by}
		ent.Held = nil
		return true, nil
	})
	if err != nil {
		return nil, err
	}
	k.doc = stored
	if refusal != nil {
		return nil, refusal
	}
	return events, nil
}
