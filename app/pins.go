package app

import (
	"context"
	"log/slog"
	"slices"

	"troupe/audit"
	"troupe/config"
	"troupe/pins"
)

// The pins of the downstream servers' tools and prompts (package pins):
// where they are kept, and how what changes in them is reported.

// pinStore is where cfg keeps its pins: the pins file (config.PinsFile);
// a clustered config's are in etcd, which only a running node reaches
// (pinStoreFor), so no store here.
func pinStore(cfg *config.Config) (pins.Store, error) {
	if cfg.Cluster.Provider != "" {
		return clusterPinsElsewhere{}, nil
	}
	path, err := cfg.PinsFile()
	if err != nil {
		return nil, err
	}
	return pins.FileStore{Path: path}, nil
}

// newPinKeeper is the Keeper of cfg's pins. A read-only one (New's, for
// `troupe tools` and `config check`) compares without writing; Run
// replaces it with one that records.
func newPinKeeper(cfg *config.Config, readOnly bool) (*pins.Keeper, error) {
	store, err := pinStore(cfg)
	if err != nil {
		return nil, err
	}
	return pins.NewKeeper(store, pins.KeeperOptions{ReadOnly: readOnly}), nil
}

// pinMode is the server's on_change (config validation allows only the
// modes).
func pinMode(s config.McpServer) pins.Mode {
	m, _ := pins.ParseMode(s.OnChange)
	return m
}

// pinEvents maps the pins' events to the audit log's.
var pinEvents = map[pins.EventKind]string{
	pins.Pinned:         audit.EventPinned,
	pins.Changed:        audit.EventChanged,
	pins.Restored:       audit.EventRestored,
	pins.AcceptedChange: audit.EventAccepted,
}

// pinRecords are the audit records of events: one per tool or prompt, so
// that each change and each acceptance has its own. who is the identity
// whose act it was (an operator's accept), "" for troupe's own.
func pinRecords(events []pins.Event, who string) []*audit.Record {
	var out []*audit.Record
	for _, e := range events {
		for _, name := range e.Names {
			p := &audit.Pin{Server: e.Server, Kind: string(e.Kind), Version: e.Hashes[name],
				Change: e.Changes[name].Summary(), By: e.By}
			if e.What == pins.Changed {
				p.Mode = string(e.Mode)
			}
			out = append(out, &audit.Record{Event: pinEvents[e.What], Identity: who, Tool: name, Pin: p})
		}
	}
	return out
}

// logPinEvents logs each event on one line, however many tools it names:
// a warning for a change (held, asked about, or accepted by on_change),
// information for first use, a version listed as pinned again, and an
// operator's accept.
func logPinEvents(log *slog.Logger, events []pins.Event) {
	for _, e := range events {
		level := slog.LevelInfo
		if e.What == pins.Changed || e.What == pins.AcceptedChange && e.By == pins.ByOnChange {
			level = slog.LevelWarn
		}
		log.Log(context.Background(), level, e.Message(), "server", e.Server, "kind", string(e.Kind), "event", string(e.What), "names", e.Names)
	}
}

// pinKeeper is the Keeper in force: New's read-only one, Run's that
// records while Run runs.
func (a *App) pinKeeper() *pins.Keeper {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.pins
}

// reportPins reports events, what a review or an accept changed in the
// pins: one log line each (logPinEvents), an audit record per tool or
// prompt (pinRecords; who is the identity whose act it was, "" for
// troupe's own) while Run runs, the metrics. An operator's accept also
// has the registry built again and tells sessions that prompts changed,
// so what was held is served at once.
func (a *App) reportPins(events []pins.Event, who string) {
	if len(events) == 0 {
		return
	}
	a.mu.Lock()
	run, keeper := a.run, a.pins
	a.mu.Unlock()
	a.reportPinsTo(run, keeper, events, who)
	if run == nil || !slices.ContainsFunc(events, func(e pins.Event) bool {
		return e.What == pins.AcceptedChange && e.By != pins.ByOnChange
	}) {
		return
	}
	run.rebuild()
	if slices.ContainsFunc(events, func(e pins.Event) bool { return e.Kind == pins.Prompt }) {
		run.host.PromptsChanged()
	}
}

// notePins reports the events of a registry build's reviews; a.mu is
// held (or nothing runs). While Run runs, the held gauge is set even
// when nothing changed: versions held before a restart count from the
// first build.
func (a *App) notePins(events []pins.Event) {
	switch {
	case len(events) > 0:
		a.reportPinsTo(a.run, a.pins, events, "")
	case a.run != nil:
		a.countHeld(a.pins)
	}
}

// reportPinsTo is reportPins with the run (nil: not running, nothing is
// audited) and the keeper (whose held versions the gauge counts) given.
func (a *App) reportPinsTo(run *running, keeper *pins.Keeper, events []pins.Event, who string) {
	logPinEvents(a.log, events)
	if run != nil {
		for _, r := range pinRecords(events, who) {
			run.host.Audit(r)
		}
	}
	if a.obs == nil {
		return
	}
	for _, e := range events {
		a.obs.hub.PinEvent(e.Server, string(e.Kind), string(e.What), len(e.Names))
	}
	a.countHeld(keeper)
}

// countHeld sets troupe_downstream_held from keeper's held versions.
func (a *App) countHeld(keeper *pins.Keeper) {
	if a.obs == nil || keeper == nil {
		return
	}
	counts, err := keeper.HeldCounts(context.Background())
	if err != nil {
		return // the review that failed to read them said why
	}
	a.obs.hub.SetHeld(counts)
}

// runPinStores are where a running troupe keeps its pins (keep: the pins
// file, or on a cluster node the store the nodes share: pinStoreFor) and
// what it watches (watch: the same, or nil when no downstream server is
// configured, so that nothing is watched for nothing).
func runPinStores(cfg *config.Config, node ClusterNode) (keep, watch pins.Store, err error) {
	if keep, err = pinStoreFor(cfg, node); err != nil {
		return nil, nil, err
	}
	if cfg.HasDownstreamServers() {
		watch = keep
	}
	return keep, watch, nil
}

// usePins makes keep's pins the ones in force (a.pins, a Keeper that
// records) and has the run's watcher (watchPins) watch watch; a.mu is
// held.
func (a *App) usePins(run *running, keep, watch pins.Store) {
	a.pins = pins.NewKeeper(keep, pins.KeeperOptions{})
	// The watcher takes the newest store; one it has not taken yet is
	// replaced.
	select {
	case <-run.pinStores:
	default:
	}
	run.pinStores <- watch
}

// setPins is the reload of pins.path (or of whether any downstream server
// is configured): a Keeper of the new place, watched, and every listing
// reviewed against it.
func setPins(a *App, run *running, next *config.Config) {
	keep, watch, err := runPinStores(next, run.node)
	if err != nil {
		a.log.Error("config reload: pins.path: keeping the pins in force", "err", err)
		return
	}
	a.usePins(run, keep, watch)
	run.rebuild()
	run.host.PromptsChanged()
}

// watchPins watches the pins in force (usePins sends each new store on
// stores; nil watches nothing) until ctx ends. When they changed under
// troupe (`troupe tools --accept` in another process, another node), the
// Keeper reads them again, and if they differ the registry is built
// again and sessions are told that prompts changed, which reviews every
// listing against the new pins.
func (a *App) watchPins(ctx context.Context, stores <-chan pins.Store) {
	var store pins.Store
	for {
		wctx, cancel := context.WithCancel(ctx)
		changed := make(chan struct{}, 1)
		ended := make(chan error, 1)
		if store != nil {
			go func(s pins.Store) {
				ended <- s.Watch(wctx, func() {
					select {
					case changed <- struct{}{}:
					default:
					}
				})
			}(store)
		}
		next, done, over := a.watchOne(ctx, stores, changed, ended)
		cancel()
		if store != nil && !over {
			<-ended // the watching goroutine has returned
		}
		if done {
			return
		}
		store = next
	}
}

// watchOne serves one store's watch (changed, ended) until ctx ends
// (done) or a new store arrives on stores (next); over says the watch
// has already ended (ended was read).
func (a *App) watchOne(ctx context.Context, stores <-chan pins.Store, changed <-chan struct{}, ended <-chan error) (next pins.Store, done, over bool) {
	for {
		select {
		case <-ctx.Done():
			return nil, true, over
		case s := <-stores:
			return s, false, over
		case <-changed:
			a.pinsChanged(ctx)
		case err := <-ended:
			if err != nil {
				a.log.Warn("the pins are not watched: an accept made elsewhere is seen at the next reload or restart", "err", err)
			}
			over, ended = true, nil // wait for a new store or the end
		}
	}
}

// pinsChanged reads the pins again after the watch saw them change, and
// when they differ from those troupe had, reviews every listing again.
func (a *App) pinsChanged(ctx context.Context) {
	keeper := a.pinKeeper()
	changed, err := keeper.Load(ctx)
	if err != nil {
		a.log.Error("the pins changed but cannot be read", "err", err)
		return
	}
	if !changed {
		return
	}
	a.log.Info("the pins changed: reviewing the downstream servers' tools and prompts again")
	a.countHeld(keeper)
	a.mu.Lock()
	run := a.run
	a.mu.Unlock()
	if run != nil {
		run.rebuild()
		run.host.PromptsChanged()
	}
}

// reviewPrompts compares a page of server's prompts with their pins
// (the server's on_change) and reports what changed: the gateway's
// review of each prompts/list page.
func (a *App) reviewPrompts(ctx context.Context, server string, defs []pins.Def) map[string]pins.Verdict {
	a.mu.Lock()
	keeper, cfg := a.pins, a.cfg
	a.mu.Unlock()
	review, err := keeper.Review(ctx, server, pins.Prompt, pinMode(cfg.McpServers[server]), defs)
	if err != nil {
		a.log.Error("downstream prompts: the pins cannot be kept", "server", server, "err", err)
	}
	a.reportPins(review.Events, "")
	return review.Verdicts
}

// heldPrompt is the refusal of server's prompt remote (exposed as
// exposed) while a changed version of it is held, whatever the server's
// on_change ("ask" holds prompts too: there is no call to ask about); ""
// when none is.
func (a *App) heldPrompt(ctx context.Context, server, exposed, remote string) string {
	h, held, err := a.pinKeeper().HeldOne(ctx, server, pins.Prompt, remote)
	switch {
	case err != nil:
		return heldMessage("prompt", exposed, server, remote, pins.Unreadable)
	case held:
		return heldMessage("prompt", exposed, server, remote, h.Change)
	}
	return ""
}
