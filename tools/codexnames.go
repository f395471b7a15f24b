package tools

import (
	"fmt"
	"slices"
	"strings"
)

// CodexName is how Codex 0.169 names an MCP tool for the model: every
// character outside [A-Za-z0-9_] becomes "_" (repo.readFile → repo_readFile).
func CodexName(name string) string {
	var b strings.Builder
	for _, r := range name {
		if r < 128 && (r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || r == '_') {
			b.WriteRune(r)
		} else {
			b.WriteByte('_')
		}
	}
	return b.String()
}

// codexNameBudget is the length Codex keeps "mcp__<server>__<tool>" within;
// longer names are cut and given a hash suffix.
const codexNameBudget = 128

// CodexNameWarnings lists what Codex would do to the tool names of a
// server it knows as server: names it would change, names it would cut,
// and names that collide once changed (Codex then suffixes both with a
// hash, so neither keeps the name the model was told about). Sorted; empty
// when Codex shows every name as is.
func CodexNameWarnings(server string, names []string) []string {
	var out []string
	byMapped := map[string][]string{}
	for _, n := range names {
		m := CodexName(n)
		byMapped[m] = append(byMapped[m], n)
		if full := "mcp__" + CodexName(server) + "__" + m; len(full) > codexNameBudget {
			out = append(out, fmt.Sprintf("tool %q: Codex shows it as %s, %d characters over its %d-character limit, so it will be cut and suffixed",
				n, full, len(full)-codexNameBudget, codexNameBudget))
		}
	}
	for m, ns := range byMapped {
		if len(ns) > 1 {
			slices.Sort(ns)
			out = append(out, fmt.Sprintf("tools %s all become %q in Codex, which then renames each with a hash suffix; rename them",
				strings.Join(quoteAll(ns), ", "), m))
		}
	}
	slices.Sort(out)
	return out
}

func quoteAll(ss []string) []string {
	out := make([]string, len(ss))
	for i, s := range ss {
		out[i] = fmt.Sprintf("%q", s)
	}
	return out
}
