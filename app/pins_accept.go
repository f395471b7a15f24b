package app

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/user"
	"slices"
	"strings"

	"troupe/audit"
	"troupe/config"
	"troupe/pins"
)

// An operator's accept of a held downstream tool or prompt: `troupe tools
// --accept SERVER[.TOOL]` (AcceptPins, run by the CLI's own App, beside a
// running troupe that picks the change up through its pins-file watch)
// and the status page's Accept button (AcceptHeld, in the running troupe).

// ErrUnknownServer is PinTarget's error when no [mcp_servers] entry has
// the name asked for.
var ErrUnknownServer = errors.New("no such downstream server")

// PinTarget splits `troupe tools --accept`'s SERVER[.TOOL] into the
// server's name in [mcp_servers] and the tool's or prompt's name on it
// ("" for every held one of the server). A server's name may itself hold
// dots ("acme.files"): arg is matched against the configured names, and
// the longest that arg is, or begins with followed by ".", wins. An
// unknown server is an error wrapping ErrUnknownServer that names the
// servers there are.
func (a *App) PinTarget(arg string) (server, name string, err error) {
	cfg := a.config()
	best := ""
	for s := range cfg.McpServers {
		if (arg == s || strings.HasPrefix(arg, s+".")) && len(s) > len(best) {
			best = s
		}
	}
	if best == "" {
		names := slices.Sorted(func(yield func(string) bool) {
			for s := range cfg.McpServers {
				if !yield(s) {
					return
				}
			}
		})
		there := "no [mcp_servers] are configured"
		if len(names) > 0 {
			there = "the servers are " + strings.Join(names, ", ")
		}
		return "", "", fmt.Errorf("%w %q (%s)", ErrUnknownServer, arg, there)
	}
	return best, strings.TrimPrefix(strings.TrimPrefix(arg, best), "."), nil
}

// AcceptPins pins the held versions of server's tool or prompt named name
// (every held one of the server when name is ""), accepted by who (the
// operator's identity as the audit log names it), and reports it: in a
// running troupe through reportPins (log, audit, metric, the registry
// rebuilt); otherwise (the CLI) in the log and appended to the audit log
// the configuration names, which a running troupe shares (appends are
// locked across processes). An error wraps pins.ErrNothingHeld when
// nothing of that name is held.
func (a *App) AcceptPins(ctx context.Context, server, name, who string) ([]pins.Event, error) {
	events, err := a.pinKeeper().Accept(ctx, server, name, who)
	if err != nil {
		return nil, err
	}
	return events, a.acceptedPins(events, who)
}

// AcceptHeld pins the held version of server's tool or prompt (kind) named
// name whose hash is hash, accepted by who: the status page's Accept,
// which accepts exactly the version it showed. Errors wrap
// pins.ErrNothingHeld (nothing of that name is held any more) or
// pins.ErrChangedAgain (what is held now is another version).
func (a *App) AcceptHeld(ctx context.Context, server string, kind pins.Kind, name, hash, who string) ([]pins.Event, error) {
	events, err := a.pinKeeper().AcceptVersion(ctx, server, kind, name, hash, who)
	if err != nil {
		return nil, err
	}
	return events, a.acceptedPins(events, who)
}

// acceptedPins reports an operator's accept: through reportPins while Run
// runs, else in the log and the audit log. The accept itself is kept
// whatever happens to its audit records; an error says they were lost.
func (a *App) acceptedPins(events []pins.Event, who string) error {
	a.mu.Lock()
	running := a.run != nil
	cfg := a.cfg
	a.mu.Unlock()
	if running {
		a.reportPins(events, who)
		return nil
	}
	logPinEvents(a.log, events)
	if err := appendAudit(cfg, pinRecords(events, who)); err != nil {
		return fmt.Errorf("accepted, but its audit records were not written: %w", err)
	}
	return nil
}

// appendAudit appends rs to the audit log cfg writes, when it is on: the
// file a running troupe appends to, under the lock every writer of it
// takes.
func appendAudit(cfg *config.Config, rs []*audit.Record) error {
	if !cfg.Audit.Enabled || len(rs) == 0 {
		return nil
	}
	path, err := cfg.AuditFile()
	if err != nil {
		return err
	}
	l, err := audit.Open(path, audit.Options{MaxBytes: cfg.Audit.MaxBytes, MaxFiles: cfg.Audit.MaxFiles})
	if err != nil {
		return err
	}
	out := make([]audit.Record, len(rs))
	for i, r := range rs {
		out[i] = *r
	}
	err = l.AppendAll(out)
	if cerr := l.Close(); err == nil {
		err = cerr
	}
	return err
}

// HeldPins lists the held versions of the downstream servers' tools and
// prompts, as the pins record them (nothing when the configuration serves
// no [mcp_servers]: the pins file is not read).
func (a *App) HeldPins(ctx context.Context) ([]pins.HeldItem, error) {
	if !a.config().HasDownstreamServers() {
		return nil, nil
	}
	return a.pinKeeper().Held(ctx)
}

// LocalOperator is who accepts from the command line: "local:<user>",
// the local identity (a stdio session's, "local") with the login name of
// the user running troupe, so the audit log says which person it was.
func LocalOperator() string {
	if u, err := user.Current(); err == nil && u.Username != "" {
		return "local:" + u.Username
	}
	if name := os.Getenv("USER"); name != "" {
		return "local:" + name
	}
	return "local"
}
