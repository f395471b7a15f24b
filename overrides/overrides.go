// Package overrides reads what a client sets for its own session in
// initialize (a working directory inside the workspace and environment
// variables, under _meta."dev.troupe/session") and checks it against what
// the operator allows ([sessions]: Policy). The result, a
// *tools.Overrides, reaches each of the session's calls, its approval
// prompts and audit records; Meta tells the client in tools/list what its
// calls will use. Refusals are written for the client: they say what was
// refused and how the operator allows it, never a host path.
package overrides

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"sort"
	"strings"

	"troupe/protocol"
	"troupe/redact"
	"troupe/tools"
	"troupe/workspace"
)

// MetaKey is the initialize _meta member in which a client sets its
// session's working directory and environment:
//
//	"_meta": {"dev.troupe/session": {"cwd": "sub/dir", "env": {"NAME": "value"}}}
//
// tools/list answers carry the same key in their _meta with what the
// session's calls will use.
const MetaKey = protocol.MetaPrefix + "session"

// Policy is what the operator lets a session set for itself (the
// [sessions] table). The zero value lets it set nothing.
type Policy struct {
	// Allow lets clients set a working directory and environment
	// variables for their session in initialize; off, an initialize that
	// asks is refused.
	Allow bool
	// Env lists the variable names (exact) a session may set.
	Env []string
	// Workspace resolves a session's working directory (it must be a
	// directory inside it, reached through its os.Root); required when
	// Allow is set.
	Workspace *workspace.Root
}

// sessionSettings is the client's request, as sent.
type sessionSettings struct {
	Cwd *string           `json:"cwd"`
	Env map[string]string `json:"env"`
}

// Parse reads the session settings from initialize's _meta
// (meta, as sent; nil when the client sent none) and checks them against p. The error
// text is for the client: it names what was refused and how the operator
// allows it, never a host path.
func Parse(meta json.RawMessage, p Policy) (*tools.Overrides, error) {
	if len(meta) == 0 {
		return nil, nil
	}
	var members map[string]json.RawMessage
	if json.Unmarshal(meta, &members) != nil {
		return nil, nil // initialize's own decoding reports bad params
	}
	raw, ok := members[MetaKey]
	if !ok || string(raw) == "null" {
		return nil, nil
	}
	where := `_meta."` + MetaKey + `"`
	var s sessionSettings
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&s); err != nil {
		return nil, fmt.Errorf(`%s must be an object with "cwd" (a string) and "env" (an object of strings)`, where)
	}
	if s.Cwd == nil && len(s.Env) == 0 {
		return nil, nil // asks for nothing
	}
	if !p.Allow {
		return nil, fmt.Errorf("%s: this server does not let sessions set their working directory or environment "+
			"(the operator allows it with [sessions] allow_overrides = true in troupe's config)", where)
	}
	o := &tools.Overrides{}
	if len(s.Env) > 0 {
		names := make([]string, 0, len(s.Env))
		for k := range s.Env {
			names = append(names, k)
		}
		sort.Strings(names)
		for _, k := range names {
			if !slices.Contains(p.Env, k) {
				allowed := "none"
				if len(p.Env) > 0 {
					allowed = strings.Join(p.Env, ", ")
				}
				return nil, fmt.Errorf("%s.env: %q is not a variable sessions may set (allowed: %s; the operator lists them in [sessions] allowed_env)",
					where, k, allowed)
			}
			if strings.IndexByte(s.Env[k], 0) >= 0 {
				return nil, fmt.Errorf("%s.env: the value of %s contains a NUL character", where, k)
			}
		}
		o.Env = s.Env
	}
	if s.Cwd != nil {
		rel, err := sessionDir(p.Workspace, *s.Cwd)
		if err != nil {
			return nil, fmt.Errorf("%s.cwd %q %v", where, *s.Cwd, err)
		}
		o.Cwd = rel
	}
	if o.Cwd == "" && o.Env == nil {
		return nil, nil
	}
	return o, nil
}

// sessionDir resolves a session's working directory to a clean path
// relative to the workspace: "..", absolute paths elsewhere, symlinks that
// lead out and anything that is not a directory are refused, in the words
// the command tools use when they check it again for a call.
func sessionDir(ws *workspace.Root, p string) (string, error) {
	if ws == nil {
		return "", errors.New("cannot be used: the server has no workspace")
	}
	host, err := ws.WorkDir(p)
	if err != nil {
		_, reason := workspace.DirProblem(err)
		return "", errors.New(reason)
	}
	return ws.RelOf(host), nil
}

// Meta is the tools/list _meta member (under MetaKey) that tells the client what
// its session's calls use: the working directory (the workspace root
// unless the session set one), the variables the session set (values
// masked: they may be secrets) and whether it may set them at all.
// Command tools' own configured cwd and env apply below the session's.
func Meta(o *tools.Overrides, p Policy) map[string]any {
	m := map[string]any{"cwd": ".", "overrides": o != nil, "allowed": p.Allow}
	if p.Allow {
		m["allowed_env"] = append([]string{}, p.Env...)
	}
	if o != nil {
		if o.Cwd != "" {
			m["cwd"] = o.Cwd
		}
		if len(o.Env) > 0 {
			env := make(map[string]string, len(o.Env))
			for k := range o.Env {
				env[k] = redact.Mask
			}
			m["env"] = env
		}
	}
	return m
}

// EnvNames are the names of o's variables, sorted, for logs and audit
// records (values stay out of both).
func EnvNames(o *tools.Overrides) []string {
	if o == nil || len(o.Env) == 0 {
		return nil
	}
	names := make([]string, 0, len(o.Env))
	for k := range o.Env {
		names = append(names, k)
	}
	sort.Strings(names)
	return names
}
