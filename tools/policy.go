package tools

import (
	"fmt"
	"path"
	"slices"
)

// Registration is a tool with the place it comes from, so a clash of names
// can say which two definitions collide.
type Registration struct {
	Tool   Tool
	Source string // e.g. "first-party", `config [mcp."git.status"] in /etc/troupe.toml`
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
func Build(regs []Registration, p Policy) (*Registry, error) {
	seen := make(map[string]string, len(regs))
	var visible []Tool
	for _, r := range regs {
		name := r.Tool.Spec().Name
		if first, dup := seen[name]; dup {
			return nil, fmt.Errorf("tool %q is defined twice: by %s and by %s", name, first, r.Source)
		}
		seen[name] = r.Source
		if p.Visible(name) {
			visible = append(visible, r.Tool)
		}
	}
	reg, err := NewRegistry(visible...)
	if err != nil {
		return nil, err
	}
	return reg, nil
}
