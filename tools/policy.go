package tools

import (
	"fmt"
	"path"
	"slices"
	"unicode/utf8"
)

// Registration is a tool with the place it comes from, so a clash of names
// can say which two definitions collide.
type Registration struct {
	Tool   Tool
	Source string // e.g. "first-party", `config [mcp."git.status"] in /etc/troupe.toml`
	// Held, when not empty, holds the tool: a downstream tool that
	// changed since it was trusted and waits for an operator to accept the
	// change (issue 29). The registry neither lists nor runs it; a call of
	// it is refused with Held as its message (Registry.Held), so the model
	// learns why rather than reading "unknown tool".
	Held string
}

// Policy decides which tools sessions see: a tool is visible when its name
// matches an Allow pattern and no Deny pattern (path.Match globs; deny
// wins). The zero Policy allows everything.
type Policy struct {
	Allow []string
	Deny  []string
}

// Visible reports whether the policy shows the tool name.
func (p Policy) Visible(name string) bool {
	for _, d := range p.Deny {
		if ok, _ := path.Match(d, name); ok {
			return false
		}
	}
	if len(p.Allow) == 0 {
		return true
	}
	return slices.ContainsFunc(p.Allow, func(a string) bool { ok, _ := path.Match(a, name); return ok })
}

// Build makes the registry sessions use: every registration is checked
// (names, schemas), two registrations of one name are an error naming both
// sources (whether or not the policy would hide one), and the tools the
// policy hides are left out, so they can be neither listed nor called.
// Held registrations are left out of the listing too, but remembered with
// their message (Registry.Held) when the policy shows their name; their
// schemas are not compiled, since nothing runs them.
func Build(regs []Registration, p Policy) (*Registry, error) {
	seen := make(map[string]string, len(regs))
	var visible []Tool
	var held map[string]heldTool
	for _, r := range regs {
		name := r.Tool.Spec().Name
		if first, dup := seen[name]; dup {
			return nil, fmt.Errorf("tool %q is defined twice: by %s and by %s", name, first, r.Source)
		}
		seen[name] = r.Source
		switch {
		case !p.Visible(name):
		case r.Held != "":
			if held == nil {
				held = map[string]heldTool{}
			}
			source, _ := r.Tool.Spec().Meta[MetaSource].(string)
			held[name] = heldTool{message: r.Held, source: source}
		default:
			visible = append(visible, r.Tool)
		}
	}
	reg, err := NewRegistry(visible...)
	if err != nil {
		return nil, err
	}
	reg.setHeld(held)
	return reg, nil
}

// PatternMatch is what one pattern of a Policy matches among the tools a
// configuration is known to have, for `troupe config check`.
type PatternMatch struct {
	// List is "allow" or "deny"; Pattern is the pattern as configured.
	List, Pattern string
	// Tools are the known tools' names it matches, sorted.
	Tools []string
	// Prefixes are the tool name prefixes (a downstream server's prefix
	// and separator, as given) some of whose tools it may match: such
	// tools are known only once their server lists them.
	Prefixes []string
}

// Explain says, for each pattern of p (allow first, then deny, in their
// order), which of known it matches and which of prefixes it may match a
// name under.
func (p Policy) Explain(known, prefixes []string) []PatternMatch {
	var out []PatternMatch
	explain := func(list string, patterns []string) {
		for _, pat := range patterns {
			m := PatternMatch{List: list, Pattern: pat}
			for _, name := range known {
				if ok, _ := path.Match(pat, name); ok {
					m.Tools = append(m.Tools, name)
				}
			}
			for _, pre := range prefixes {
				if MayMatchUnder(pat, pre) {
					m.Prefixes = append(m.Prefixes, pre)
				}
			}
			slices.Sort(m.Tools)
			out = append(out, m)
		}
	}
	explain("allow", p.Allow)
	explain("deny", p.Deny)
	return out
}

// MayMatchUnder reports whether pattern (path.Match syntax) matches some
// name that starts with prefix and goes on after it: whether it may match
// tools of a downstream server whose names start with prefix. A malformed
// pattern matches nothing.
func MayMatchUnder(pattern, prefix string) bool {
	if _, err := path.Match(pattern, ""); err != nil {
		return false
	}
	return mayMatchUnder(pattern, prefix)
}

// mayMatchUnder is MayMatchUnder for a well-formed pattern: it matches the
// pattern against prefix; once prefix is used up, what is left of the
// pattern matches some rest of the name (a well-formed pattern always
// matches some string without '/'), provided it asks for at least one
// more character or can match the empty one with the name going on.
func mayMatchUnder(pattern, prefix string) bool {
	if prefix == "" {
		// The name goes on after the prefix: some non-empty rest must
		// match what is left, which fails only when nothing is left.
		return pattern != ""
	}
	if pattern == "" {
		return false
	}
	r, n := utf8.DecodeRuneInString(prefix)
	switch pattern[0] {
	case '*':
		// The star matches no more of the prefix, or one more rune of it.
		return mayMatchUnder(pattern[1:], prefix) || (r != '/' && mayMatchUnder(pattern, prefix[n:]))
	case '?':
		return r != '/' && mayMatchUnder(pattern[1:], prefix[n:])
	case '[':
		end := classEnd(pattern)
		if ok, _ := path.Match(pattern[:end], string(r)); !ok {
			return false
		}
		return mayMatchUnder(pattern[end:], prefix[n:])
	case '\\':
		pr, pn := utf8.DecodeRuneInString(pattern[1:])
		return pr == r && mayMatchUnder(pattern[1+pn:], prefix[n:])
	}
	pr, pn := utf8.DecodeRuneInString(pattern)
	return pr == r && mayMatchUnder(pattern[pn:], prefix[n:])
}

// classEnd is the length of the character class pattern starts with
// ("[...]"), pattern being well-formed.
func classEnd(pattern string) int {
	i := 1
	if i < len(pattern) && pattern[i] == '^' {
		i++
	}
	for first := true; i < len(pattern); first = false {
		switch {
		case pattern[i] == ']' && !first:
			return i + 1
		case pattern[i] == '\\':
			i += 2
		default:
			i++
		}
	}
	return len(pattern)
}
