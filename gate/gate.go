// Package gate decides what troupe's approval gate asks, binds and
// answers. It holds the pure parts of the gate — which calls need a
// person, the form the person sees, the hash an approval binds to, and the
// refusal the model reads — so they can be tested without actors; the
// approval actor in package actors does the asking.
//
// A call needs approval when its tool's tools.Safety says so
// (RequiresApproval, or HighRisk, which no configuration can turn off).
// A session may trust a tool for the rest of the session when a person
// says so; the operator may trust tools that are not high-risk in the
// configuration ([approvals] trust). Nothing else skips the question, and
// neither skips it for a downstream tool that changed since it was trusted
// and that no operator accepted (tools.Safety.Changed): every call of it
// asks, and the person sees what changed.
package gate

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"path"
	"slices"
	"sort"
	"strconv"
	"strings"
	"time"

	"troupe/internal/jsonvalue"
	"troupe/protocol"
	"troupe/redact"
	"troupe/tools"
)

// DefaultTimeout is how long a person has to answer when Policy.Timeout is
// zero.
const DefaultTimeout = 5 * time.Minute

// maxShownArguments bounds the arguments quoted in a prompt.
const maxShownArguments = 2048

// Bounds on the diff of a changed tool a prompt shows (Safety.Changed):
// the lines (pins cuts its diff to 120 already) and each line's bytes.
const (
	maxShownChangeLines    = 120
	maxShownChangeLineSize = 1024
)

// Policy is the operator's part of the gate.
type Policy struct {
	// Timeout is how long an approval may wait for its answer.
	Timeout time.Duration
	// Trust lists glob patterns (path.Match) of tools that need no
	// approval in any session. High-risk tools are never trusted this way.
	Trust []string
}

// TimeoutOrDefault is p.Timeout, or DefaultTimeout when unset.
func (p Policy) TimeoutOrDefault() time.Duration {
	if p.Timeout > 0 {
		return p.Timeout
	}
	return DefaultTimeout
}

// Trusts reports whether the configuration trusts spec's tool. A
// high-risk tool is never trusted, nor one that changed since it was
// trusted (Safety.Unaccepted): the operator trusted another version.
func (p Policy) Trusts(spec tools.Spec) bool {
	if spec.Safety.HighRisk || spec.Safety.Unaccepted() {
		return false
	}
	for _, pat := range p.Trust {
		if ok, _ := path.Match(pat, spec.Name); ok {
			return true
		}
	}
	return false
}

// Call is one call as the gate sees it.
type Call struct {
	Spec      tools.Spec
	Arguments json.RawMessage
	// Decoded is Arguments as tools.Entry.Check decoded them to validate
	// them (tools.Arguments.Value), so that Hash does not parse them
	// again; nil means Hash parses Arguments.
	Decoded map[string]any
	Preview *tools.Preview   // nil for tools that run no program
	Secrets *redact.Redactor // the server's secret values; nil means none
	// Session is the cwd and env the session set for itself (nil: none);
	// the prompt shows them and the hash binds them.
	Session *tools.Overrides
	// Caller names who asked for the call ("token:ci", "oauth:<subject>";
	// identity.Identity.String) when the front tells callers apart, so the
	// person approving knows whose call it is; "" (stdio, one caller)
	// shows nothing. The hash does not bind it: the state already is the
	// caller's.
	Caller string
}

// Hash is the hex SHA-256 an approval binds to: the tool, its arguments
// (canonical JSON), the working directory, the environment the call sets
// and the sandbox profile. Two calls with the same hash do the same thing.
//
// The hashed text is, byte for byte, what encoding/json wrote for the call
// when the hash was first made, and must stay so: sealed approvals
// (package approvalstate) and audit records bind these hashes. It is now
// written by hand, from the arguments the registry decoded (Call.Decoded):
//
//	{"tool":…,"args":…,"cwd":…,"env":{…sorted…},"command":[…],"sandbox":…,"network":…,"session":{"Cwd":…,"Env":{…}}}
//
// with args in jsonvalue.AppendCanonical's form, env and command null when
// nil, and session left out when nil (hash_golden_test.go pins it). A tool
// that changed since it was trusted (Safety.Unaccepted) adds, last,
// "changed":{"version":…,"summary":…,"lines":[…]}: the approval binds the
// version the person was shown, so a state approved for one version never
// runs another. Other tools' text is as it always was.
func Hash(c Call) string {
	var stack [1024]byte // most calls' text fits: no allocation
	b := append(stack[:0], `{"tool":`...)
	b = jsonvalue.AppendString(b, c.Spec.Name)
	b = append(b, `,"args":`...)
	if c.Decoded != nil {
		b = jsonvalue.AppendCanonical(b, c.Decoded)
	} else {
		var args any
		_ = json.Unmarshal(c.Arguments, &args) // validated JSON; nil when absent
		b = jsonvalue.AppendCanonical(b, args)
	}
	var p tools.Preview
	if c.Preview != nil {
		p = *c.Preview
	}
	b = append(b, `,"cwd":`...)
	b = jsonvalue.AppendString(b, p.Cwd)
	b = append(b, `,"env":`...)
	b = jsonvalue.AppendStringMap(b, p.Env)
	b = append(b, `,"command":`...)
	b = jsonvalue.AppendStrings(b, p.Command)
	b = append(b, `,"sandbox":`...)
	b = jsonvalue.AppendString(b, c.Spec.Safety.SandboxProfile)
	b = append(b, `,"network":`...)
	b = strconv.AppendBool(b, c.Spec.Safety.AllowNetwork)
	if o := c.Session; o != nil {
		b = append(b, `,"session":{"Cwd":`...)
		b = jsonvalue.AppendString(b, o.Cwd)
		b = append(b, `,"Env":`...)
		b = jsonvalue.AppendStringMap(b, o.Env)
		b = append(b, '}')
	}
	if s := c.Spec.Safety; s.Unaccepted() {
		b = append(b, `,"changed":{"version":`...)
		b = jsonvalue.AppendString(b, s.ChangeVersion)
		b = append(b, `,"summary":`...)
		b = jsonvalue.AppendString(b, s.ChangeSummary)
		b = append(b, `,"lines":`...)
		b = jsonvalue.AppendStrings(b, s.Changed)
		b = append(b, '}')
	}
	b = append(b, '}')
	sum := sha256.Sum256(b)
	var text [2 * sha256.Size]byte
	hex.Encode(text[:], sum[:])
	return string(text[:])
}

// Form is the elicitation/create request that asks a person about c, in
// the shape revision v understands. It uses one enum field only, because
// some clients (Codex) render no numbers, and the choices are: this call
// once, this tool for the rest of the session, or deny. A tool that
// changed since it was trusted (Safety.Unaccepted) is offered once or
// deny only: its every call asks until an operator accepts the change.
func Form(c Call, v protocol.Version, hash string) *protocol.ElicitRequestParams {
	name := Printable(c.Spec.Name)
	choices := []struct{ value, title string }{
		{"once", "Allow this call once"},
		{"session", "Allow " + name + " for the rest of this session"},
		{"deny", "Deny"},
	}
	unaccepted := c.Spec.Safety.Unaccepted()
	if unaccepted {
		choices = slices.Delete(choices, 1, 2)
	}
	field := map[string]any{
		"type":        "string",
		"title":       "Decision",
		"description": "Whether troupe may run " + name + " as described.",
		"default":     "once",
	}
	if v.HasElicitationModes() {
		var one []map[string]string
		for _, ch := range choices {
			one = append(one, map[string]string{"const": ch.value, "title": ch.title})
		}
		field["oneOf"] = one
	} else {
		var values, names []string
		for _, ch := range choices {
			values, names = append(values, ch.value), append(names, ch.title)
		}
		field["enum"], field["enumNames"] = values, names
	}
	p := &protocol.ElicitRequestParams{
		Message: Message(c, hash),
		RequestedSchema: protocol.ElicitSchema{Type: "object",
			Properties: map[string]any{"decision": field}, Required: []string{"decision"}},
		// Codex reads persist to offer "remember"; troupe never remembers
		// beyond the session. The tool's name here is data for the client,
		// exact, not text for the person.
		Meta: map[string]any{"persist": []string{"session"},
			protocol.MetaPrefix + "approval": map[string]any{"tool": c.Spec.Name, "hash": hash}},
	}
	if unaccepted {
		delete(p.Meta, "persist") // nothing about this version is remembered
	}
	if v.HasElicitationModes() {
		p.Mode = "form"
	}
	return p
}

// Message is the prompt's text: what will run, where, with what, and how
// it is isolated. Secret values and secret-named arguments are masked.
// Every text taken from the call is shown through Printable (the command
// and the arguments as quoted strings), so nothing in it can hide,
// reorder or add a line.
func Message(c Call, hash string) string {
	var b strings.Builder
	s := c.Spec
	fmt.Fprintf(&b, "troupe asks before running the tool %s", Printable(s.Name))
	if s.Safety.HighRisk {
		b.WriteString(" (high risk)")
	}
	b.WriteString(".\n")
	if c.Caller != "" {
		fmt.Fprintf(&b, "Asked by: %s\n", Printable(c.Caller))
	}
	if s.Safety.Unaccepted() {
		writeChange(&b, s.Safety)
	}
	if d := firstLine(s.Description); d != "" {
		fmt.Fprintf(&b, "What it does: %s\n", Printable(d))
	}
	if c.Preview != nil {
		if len(c.Preview.Command) > 0 {
			fmt.Fprintf(&b, "Command: %s\n", shownJSON(c.Preview.Command, masker(c.Secrets)))
		}
		fmt.Fprintf(&b, "Working directory: %s (in the workspace)\n", Printable(c.Preview.Cwd))
		if keys := envKeys(c.Preview.Env); keys != "" {
			fmt.Fprintf(&b, "Environment it sets: %s\n", keys)
		}
	}
	if o := c.Session; o != nil {
		cwd := o.Cwd
		if cwd == "" {
			cwd = "(not set)"
		}
		env := envKeys(o.Env)
		if env == "" {
			env = "(none)"
		}
		fmt.Fprintf(&b, "Set by this session: working directory %s, environment %s\n", Printable(cwd), env)
	}
	effects := "none declared"
	if len(s.Safety.SideEffects) > 0 {
		effects = Printable(strings.Join(s.Safety.SideEffects, ", "))
	}
	fmt.Fprintf(&b, "Side effects: %s\n", effects)
	switch profile := s.Safety.SandboxProfile; profile {
	case "":
		b.WriteString("Isolation: runs inside troupe, confined to the workspace\n")
	case "none":
		b.WriteString("Sandbox: none (the program runs with troupe's full rights)\n")
	default:
		net := "network off"
		if s.Safety.AllowNetwork {
			net = "network allowed"
		}
		fmt.Fprintf(&b, "Sandbox: %s (writes only to the workspace and a private temp dir; %s)\n", Printable(profile), net)
	}
	fmt.Fprintf(&b, "Arguments: %s\n", shownArguments(c))
	fmt.Fprintf(&b, "Call hash: %s", hash[:16])
	return b.String()
}

// writeChange writes what changed in a tool since it was trusted: a line
// that says so, then the diff, each line behind "  | " so that no line of
// it can pass for a field of the prompt. The lines are printable already
// (pins.Change.Lines); Printable again costs nothing on them (it leaves
// backslashes alone) and keeps any other caller's lines to one line each.
func writeChange(b *strings.Builder, s tools.Safety) {
	b.WriteString("This tool changed since it was trusted")
	if s.ChangeSummary != "" {
		fmt.Fprintf(b, " (%s)", Printable(s.ChangeSummary))
	}
	b.WriteString("; an operator has not accepted the change:\n")
	lines := s.Changed
	if len(lines) > maxShownChangeLines {
		lines = lines[:maxShownChangeLines-1]
	}
	for _, l := range lines {
		l = Printable(l)
		if len(l) > maxShownChangeLineSize {
			l = l[:tools.UTF8Cut([]byte(l), maxShownChangeLineSize)] + fmt.Sprintf(" … (%d bytes in all)", len(l))
		}
		fmt.Fprintf(b, "  | %s\n", l)
	}
	if n := len(s.Changed) - len(lines); n > 0 {
		fmt.Fprintf(b, "  | … %d more lines\n", n)
	}
}

// shownArguments renders the arguments with secret-named members and
// known secret values masked, cut to maxShownArguments. It renders the
// value the registry already decoded when there is one (no second parse).
func shownArguments(c Call) string {
	var v any = c.Decoded
	if c.Decoded == nil {
		dec := json.NewDecoder(bytes.NewReader(c.Arguments))
		dec.UseNumber()
		if !json.Valid(c.Arguments) || dec.Decode(&v) != nil || v == nil {
			return "{}"
		}
	}
	text := shownJSON(v, masker(c.Secrets))
	if len(text) > maxShownArguments {
		text = text[:tools.UTF8Cut([]byte(text), maxShownArguments)] + fmt.Sprintf(" … (%d bytes in all)", len(text))
	}
	return text
}

// masker masks r's secret values in one string (identity for nil r).
func masker(r *redact.Redactor) func(string) string {
	if r == nil {
		return func(s string) string { return s }
	}
	return r.Replace
}

// envKeys lists variable names, marking secret ones; values are never
// shown.
func envKeys(env map[string]string) string {
	keys := make([]string, 0, len(env))
	for k := range env {
		shown := Printable(k)
		if redact.IsSecretKey(k) {
			shown += " (secret, value hidden)"
		}
		keys = append(keys, shown)
	}
	sort.Strings(keys)
	return strings.Join(keys, ", ")
}

func firstLine(s string) string {
	s, _, _ = strings.Cut(strings.TrimSpace(s), "\n")
	return s
}

// Ending is how an approval request ended without an approval.
type Ending int

// The endings. A deny, decline or cancel is a person's only when it came
// later than MinReadTime after the request (Refused.Unseen).
const (
	EndUnavailable Ending = iota // the client cannot ask anyone (no form elicitation, or the request failed)
	EndExpired                   // nobody answered within approvals.timeout
	EndChoseDeny                 // the answer chose "deny" on the form
	EndDeclined                  // the client declined the request
	EndCancelled                 // the client cancelled (dismissed) the request
	EndUnreadable                // the answer could not be read; troupe counts it as a refusal
)

// MinReadTime is the least time in which a person can see an approval
// form, read the tool and its arguments and answer. An answer sooner than
// that came from the client itself: Codex exec, for one, declines every
// request at once without showing it to anyone. Nobody reads a form's
// half-dozen lines in under a second; programs answer in milliseconds.
const MinReadTime = time.Second

// Refused is what troupe knows of an approval that was not given.
type Refused struct {
	Ending Ending
	// Waited is how long the answer took after the request went out; 0
	// when it is not known.
	Waited time.Duration
	// Detail says what was wrong with an unreadable answer.
	Detail string
}

// Unseen reports whether the client answered (deny, decline or cancel)
// too soon for a person to have read the request.
func (r Refused) Unseen() bool {
	switch r.Ending {
	case EndChoseDeny, EndDeclined, EndCancelled:
		return r.Waited > 0 && r.Waited < MinReadTime
	}
	return false
}

// Refusal is the error a call gets when it was not approved: what
// happened, said once, and, where the refusal was not a person's choice,
// how the operator or the person could allow the call. A person who said
// no gets no advice on how to get around them.
func Refusal(spec tools.Spec, r Refused, p Policy) *tools.Error {
	var msg string
	advise := true
	switch {
	case r.Ending == EndUnavailable:
		msg = fmt.Sprintf("%s was not run: it needs a person's approval and this client cannot ask for it "+
			"(it did not declare the elicitation capability in form mode, or the request failed).", spec.Name)
	case r.Ending == EndExpired:
		msg = fmt.Sprintf("%s was not run: nobody answered the approval request within %s.", spec.Name, p.TimeoutOrDefault())
	case r.Ending == EndUnreadable:
		msg = fmt.Sprintf("%s was not run: the client's answer to the approval request could not be read (%s), "+
			"so troupe counts it as a refusal.", spec.Name, Printable(r.Detail))
	case r.Unseen():
		verb := map[Ending]string{EndChoseDeny: "answered deny to", EndDeclined: "declined", EndCancelled: "cancelled"}[r.Ending]
		msg = fmt.Sprintf("%s was not run: the client %s the approval request %s after it was sent, too soon for "+
			"anyone to have read it, so nobody was asked (Codex exec, for one, declines every request without showing it).",
			spec.Name, verb, shortDuration(r.Waited))
	default:
		what := map[Ending]string{EndChoseDeny: "chose deny when asked to approve it", EndDeclined: "declined the approval request",
			EndCancelled: "dismissed the approval request without approving it"}[r.Ending]
		msg = fmt.Sprintf("%s was not run: the person at the client %s. Ask them before trying it again.", spec.Name, what)
		advise = false
	}
	if advise {
		msg += " " + howToAllow(spec)
	}
	return &tools.Error{Kind: tools.KindPermissionDenied, Message: msg}
}

// shortDuration says d to the millisecond, never "0s".
func shortDuration(d time.Duration) string {
	if d < time.Millisecond {
		return "less than 1ms"
	}
	return d.Round(time.Millisecond).String()
}

// howToAllow is the advice a refusal ends with. It names the settings
// that really let the tool run without asking, which depend on where the
// tool comes from (its tools.MetaSource): a command tool has its own
// [mcp.<name>] table, a downstream server's tools share their server's
// [mcp_servers.<server>] table (an [mcp.<name>] table for one of them
// would be a command tool without a command, and troupe would not start),
// and every tool that is not high-risk can be named in approvals.trust.
// A tool that changed since it was trusted asks at every call whatever
// the configuration says, until an operator accepts the change.
func howToAllow(spec tools.Spec) string {
	if spec.Safety.Unaccepted() {
		return "It changed since it was trusted, so troupe asks a person at every call until an operator accepts " +
			"the change (troupe tools shows it, troupe tools --accept accepts it): use a client that shows approval " +
			"prompts (elicitation) and allow it once."
	}
	if spec.Safety.HighRisk {
		return "It is high-risk, so troupe always asks a person first, whatever the configuration says: " +
			"use a client that shows approval prompts (elicitation), such as the Codex TUI or the MCP Inspector, " +
			"and choose to allow it once or for the session."
	}
	trust := fmt.Sprintf("add %q to trust in the [approvals] table of troupe's config (approvals.trust = [%q])", spec.Name, spec.Name)
	const prompts = "; or use a client that shows approval prompts."
	source, _ := spec.Meta[tools.MetaSource].(string)
	switch {
	case source == "config":
		return fmt.Sprintf("To run it without asking, the operator can set requires_approval = false in its [mcp.%q] "+
			"table, or %s%s", spec.Name, trust, prompts)
	case strings.HasPrefix(source, "mcp_servers."):
		server, _ := spec.Meta[protocol.MetaPrefix+"server"].(string)
		if server == "" {
			server = strings.TrimPrefix(source, "mcp_servers.")
		}
		return fmt.Sprintf("It comes from the downstream server %q. To run it without asking, the operator can %s, "+
			"or set requires_approval = false in that server's [mcp_servers.%s] table "+
			"(then no tool of that server asks)%s", server, trust, TOMLKey(server), prompts)
	}
	return "To run it without asking, the operator can " + trust + prompts
}

// TOMLKey writes key as a TOML key: bare when it may be (A-Z a-z 0-9 _ -),
// else quoted, so advice can be pasted into a config file as it is.
func TOMLKey(key string) string {
	bare := key != ""
	for _, c := range key {
		bare = bare && (c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '_' || c == '-')
	}
	if bare {
		return key
	}
	return strconv.Quote(key)
}
