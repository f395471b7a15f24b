package app

import (
	"fmt"
	"log/slog"
	"maps"
	"slices"
	"strings"
	"sync"

	"troupe/tools"
)

// renameNotes remembers, per source of tools (a downstream server, a
// command tool), which of its exposed tools Codex shows under another
// name, so that the line saying so is written when that changes rather
// than at every registry build (a server that sends list_changed three
// times at start would repeat it three times). Bounded by the sources of
// the last build.
type renameNotes struct {
	mu   sync.Mutex
	last map[string]string // source -> the renamed names, joined
}

// note logs, at info, one line per source whose exposed tools (those reg
// serves) Codex shows with "_" in place of the characters it does not
// allow: how many, and one example. The names Codex cuts or renames with
// a hash suffix are warnings of their own (tools.CodexNameWarnings).
// First-party names are documented in their Codex form and not noted.
func (n *renameNotes) note(log *slog.Logger, regs []tools.Registration, reg *tools.Registry) {
	renamed := map[string][]string{}
	for _, r := range regs {
		name := r.Tool.Spec().Name
		if r.Source == "first-party" || tools.CodexName(name) == name {
			continue
		}
		if _, served := reg.Lookup(name); served {
			renamed[r.Source] = append(renamed[r.Source], name)
		}
	}
	n.mu.Lock()
	defer n.mu.Unlock()
	next := make(map[string]string, len(renamed))
	for _, source := range slices.Sorted(maps.Keys(renamed)) {
		names := renamed[source]
		slices.Sort(names)
		key := strings.Join(names, "\x00")
		next[source] = key
		if n.last[source] == key {
			continue
		}
		log.Info("tool names: Codex shows these tools with \"_\" for each character outside [A-Za-z0-9_]",
			"defined_by", source, "tools", len(names),
			"example", fmt.Sprintf("%s -> %s", names[0], tools.CodexName(names[0])))
	}
	n.last = next
}
