package tools

import (
	"crypto/sha1"
	"encoding/hex"
	"slices"
	"strconv"
	"strings"
)

// CodexNamespace is the tool group Codex 0.169 puts a server's tools in,
// and the prefix the model sees: "mcp__" and the sanitized server name.
func CodexNamespace(server string) string {
	return "mcp__" + codexSanitize(server)
}

// CodexVisibleNames is the name the model sees, under CodexNamespace, for
// each of one server's tools, the way Codex 0.169 derives it: sanitized
// (CodexName); names that collide once sanitized both get "_" and 12 hex
// digits of a SHA-1 of the raw name; names whose "mcp__<server>__<tool>"
// exceeds 128 characters are cut and suffixed likewise. Operators see what
// the model will call a tool, which is what it is told about in prompts.
// The result maps each MCP name to its visible name.
func CodexVisibleNames(server string, names []string) map[string]string {
	namespace := CodexNamespace(server)
	identity := func(name string) string {
		// Codex's raw tool identity: server, namespace (the raw server
		// name), connector id (none), callable name and tool name.
		return server + "\x00" + server + "\x00\x00" + name + "\x00" + name
	}
	byBase := map[string][]string{}
	for _, n := range names {
		byBase[codexSanitize(n)] = append(byBase[codexSanitize(n)], n)
	}
	type candidate struct{ raw, id, callable string }
	cands := make([]candidate, 0, len(names))
	seen := map[string]bool{}
	for _, n := range names {
		if seen[n] {
			continue
		}
		seen[n] = true
		c := candidate{raw: n, id: identity(n), callable: codexSanitize(n)}
		if len(byBase[c.callable]) > 1 {
			c.callable += codexHashSuffix(c.id)
		}
		cands = append(cands, c)
	}
	slices.SortFunc(cands, func(a, b candidate) int { return strings.Compare(a.id, b.id) })
	used := map[string]bool{}
	out := make(map[string]string, len(cands))
	for _, c := range cands {
		name := c.callable
		if len(namespace)+len(name)+len(codexDelimiter) > codexNameBudget || used[namespace+name] {
			for attempt := 0; ; attempt++ {
				input := c.id
				if attempt > 0 {
					input = c.id + "\x00" + strconv.Itoa(attempt)
				}
				name = codexFitWithHash(namespace, c.callable, input)
				if !used[namespace+name] {
					break
				}
			}
		}
		used[namespace+name] = true
		out[c.raw] = name
	}
	return out
}

const (
	codexDelimiter = "__"
	codexHashLen   = 12
)

// codexSanitize is CodexName, except that an empty result becomes "_".
func codexSanitize(s string) string {
	if out := CodexName(s); out != "" {
		return out
	}
	return "_"
}

func codexHashSuffix(input string) string {
	sum := sha1.Sum([]byte(input))
	return "_" + hex.EncodeToString(sum[:])[:codexHashLen]
}

// codexFitWithHash cuts name so that namespace, the delimiter, the cut
// name and the hash suffix fit the budget. (Codex would cut the namespace
// too when even the suffix does not fit; a server name that long is
// reported by CodexNameWarnings.)
func codexFitWithHash(namespace, name, input string) string {
	suffix := codexHashSuffix(input)
	room := codexNameBudget - len(namespace) - len(codexDelimiter)
	if room < len(suffix) {
		return suffix
	}
	keep := room - len(suffix)
	if keep < len(name) {
		name = name[:keep]
	}
	return name + suffix
}
