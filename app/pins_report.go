package app

import "troupe/pins"

// pinKeeper is the Keeper in force: New's read-only one, or Run's.
func (a *App) pinKeeper() *pins.Keeper {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.pins
}

// reportPins reports events of the running troupe's pins, by who ("" for
// troupe's own): a log line each, the audit records through the host's
// writer, and the registry rebuilt so that an accepted tool is served.
func (a *App) reportPins(events []pins.Event, who string) {
	logPinEvents(a.log, events)
	a.mu.Lock()
	run := a.run
	a.mu.Unlock()
	if run == nil {
		return
	}
	for _, r := range pinRecords(events, who) {
		run.host.Audit(r)
	}
	a.rebuild()
}
