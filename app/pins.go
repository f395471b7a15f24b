package app

import (
	"context"
	"log/slog"

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
