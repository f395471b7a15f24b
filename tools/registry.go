package tools

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/json"
	"fmt"
	"log/slog"
	"maps"
	"slices"
	"strings"
	"sync"

	"github.com/santhosh-tekuri/jsonschema/v6"

	"troupe/internal/jsonvalue"
	"troupe/protocol"
)

// Registry is an immutable set of tools, sorted by name. Sessions hold a
// *Registry and swap it whole when the tool set changes, so a call always
// runs against one consistent set. The zero value is an empty registry.
type Registry struct {
	entries     []*Entry
	byName      map[string]*Entry
	fingerprint [32]byte // hash of what tools/list shows, to tell whether a new registry differs
	// held are the tools held until an operator accepts their change
	// (Registration.Held), by name, with the message a call of one gets;
	// heldPrint hashes them, so SameTools tells two holds apart.
	held      map[string]heldTool
	heldPrint [32]byte
}

// heldTool is a held registration: the message its calls get, and the
// tool's Meta[MetaSource] (where it comes from, for metrics' labels).
type heldTool struct {
	message, source string
}

// Entry is a registered tool with its compiled input schema.
type Entry struct {
	Tool  Tool
	spec  Spec
	wire  protocol.Tool
	input func() (*jsonschema.Schema, error) // nil when the tool's server validates
	print [sha256.Size]byte                  // of wire: what clients are shown of the tool
}

// NewRegistry checks and compiles the tools' specs. It fails on an invalid
// name, a duplicate name or a schema that does not compile.
func NewRegistry(ts ...Tool) (*Registry, error) {
	r := &Registry{byName: make(map[string]*Entry, len(ts))}
	for _, t := range ts {
		spec := t.Spec()
		if err := checkName(spec.Name); err != nil {
			return nil, err
		}
		if _, dup := r.byName[spec.Name]; dup {
			return nil, fmt.Errorf("tool %q registered twice", spec.Name)
		}
		var input func() (*jsonschema.Schema, error)
		switch {
		case spec.ServerValidates:
		case spec.SchemasFixed:
			// Compiled at the first call, once per registry: the tool's
			// tests prove the schemas compile (CheckSchemas).
			name, raw := spec.Name, spec.InputSchema
			input = sync.OnceValues(func() (*jsonschema.Schema, error) {
				return compileObjectSchema(name, "input", raw)
			})
		default:
			s, err := compileObjectSchema(spec.Name, "input", spec.InputSchema)
			if err != nil {
				return nil, err
			}
			if spec.OutputSchema != nil {
				if _, err := compileObjectSchema(spec.Name, "output", spec.OutputSchema); err != nil {
					return nil, err
				}
			}
			input = func() (*jsonschema.Schema, error) { return s, nil }
		}
		meta := spec.Safety.Meta()
		maps.Copy(meta, spec.Meta)
		e := &Entry{Tool: t, spec: spec, input: input, wire: protocol.Tool{
			Name: spec.Name, Title: spec.Title, Description: spec.Description,
			InputSchema: spec.InputSchema, OutputSchema: spec.OutputSchema,
			Annotations: spec.Annotations, Meta: meta,
		}}
		if e.wire.Annotations != nil && e.wire.Annotations.Title == "" && spec.Title != "" {
			a := *e.wire.Annotations
			a.Title = spec.Title // the only title 2025-03-26 clients can show
			e.wire.Annotations = &a
		}
		r.entries = append(r.entries, e)
		r.byName[spec.Name] = e
	}
	slices.SortFunc(r.entries, func(a, b *Entry) int { return strings.Compare(a.spec.Name, b.spec.Name) })
	for _, e := range r.entries {
		b, err := json.Marshal(e.wire)
		if err != nil {
			return nil, fmt.Errorf("tool %q: %w", e.spec.Name, err)
		}
		e.print = sha256.Sum256(b)
	}
	r.fingerprint = fingerprint(r.entries)
	return r, nil
}

// fingerprint hashes what tools/list shows of entries: their own
// fingerprints in name order, so a registry and a subset of it (Only) that
// hold the same tools have the same one.
func fingerprint(entries []*Entry) [32]byte {
	h := sha256.New()
	for _, e := range entries {
		h.Write(e.print[:])
	}
	var sum [32]byte
	h.Sum(sum[:0])
	return sum
}

// Only is the registry of r's tools whose names keep accepts: what one
// caller may see and use (an identity's grant). Its entries are r's, so
// nothing is compiled again.
func (r *Registry) Only(keep func(name string) bool) *Registry {
	out := &Registry{byName: map[string]*Entry{}}
	if r == nil {
		return out
	}
	for _, e := range r.entries {
		if keep(e.spec.Name) {
			out.entries = append(out.entries, e)
			out.byName[e.spec.Name] = e
		}
	}
	out.fingerprint = fingerprint(out.entries)
	// A hold the caller may not see is no business of theirs: a name its
	// grant does not allow is an unknown tool, held or not.
	var held map[string]heldTool
	for name, h := range r.held {
		if keep(name) {
			if held == nil {
				held = map[string]heldTool{}
			}
			held[name] = h
		}
	}
	out.setHeld(held)
	return out
}

// setHeld records the held tools and their fingerprint (zero when none,
// as in a registry NewRegistry made).
func (r *Registry) setHeld(held map[string]heldTool) {
	r.held, r.heldPrint = held, [32]byte{}
	if len(held) == 0 {
		return
	}
	h := sha256.New()
	for _, name := range slices.Sorted(maps.Keys(held)) {
		// Length-prefixed, so no two sets hash alike by moving text
		// between a name and a message.
		msg := held[name].message
		fmt.Fprintf(h, "%d:%s%d:%s", len(name), name, len(msg), msg)
	}
	h.Sum(r.heldPrint[:0])
}

// Held reports whether the tool name is held until an operator accepts
// its change, and the message a call of it gets (Registration.Held). A
// held tool is in no listing and Lookup does not find it.
func (r *Registry) Held(name string) (message string, ok bool) {
	if r == nil {
		return "", false
	}
	h, ok := r.held[name]
	return h.message, ok
}

// HeldSources are the held tools' names, each with where it comes from
// (its Meta[MetaSource], "mcp_servers.<server>"): metrics label a held
// tool's refused calls with its name, as a listed tool's.
func (r *Registry) HeldSources() map[string]string {
	if r == nil || len(r.held) == 0 {
		return nil
	}
	out := make(map[string]string, len(r.held))
	for name, h := range r.held {
		out[name] = h.source
	}
	return out
}

// SameTools reports whether other shows clients exactly the same tools
// (names, descriptions, schemas, annotations, _meta) and holds the same
// tools with the same messages.
func (r *Registry) SameTools(other *Registry) bool {
	if r == nil || other == nil {
		return r.Len() == 0 && other.Len() == 0 && len(r.heldSet()) == 0 && len(other.heldSet()) == 0
	}
	return r.fingerprint == other.fingerprint && r.heldPrint == other.heldPrint
}

// heldSet is r's held tools, nil for a nil registry.
func (r *Registry) heldSet() map[string]heldTool {
	if r == nil {
		return nil
	}
	return r.held
}

// checkName applies the 2025-11-25 naming rules (SEP-986).
func checkName(name string) error {
	if name == "" || len(name) > 128 {
		return fmt.Errorf("tool name %q must be 1 to 128 characters", name)
	}
	for _, c := range name {
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '_' || c == '-' || c == '.') {
			return fmt.Errorf("tool name %q: character %q is not one of A-Z a-z 0-9 _ - .", name, c)
		}
	}
	return nil
}

func compileObjectSchema(tool, which string, raw json.RawMessage) (*jsonschema.Schema, error) {
	if len(raw) == 0 {
		return nil, fmt.Errorf("tool %q: %s schema is missing", tool, which)
	}
	doc, err := jsonschema.UnmarshalJSON(bytes.NewReader(raw))
	if err != nil {
		return nil, fmt.Errorf("tool %q: %s schema is not JSON: %w", tool, which, err)
	}
	if m, ok := doc.(map[string]any); !ok || m["type"] != "object" {
		return nil, fmt.Errorf("tool %q: %s schema must have type \"object\" at its root", tool, which)
	}
	c := jsonschema.NewCompiler()
	c.DefaultDraft(jsonschema.Draft2020)
	url := "troupe:///tools/" + tool + "/" + which + ".json"
	if err := c.AddResource(url, doc); err != nil {
		return nil, fmt.Errorf("tool %q: %s schema: %w", tool, which, err)
	}
	s, err := c.Compile(url)
	if err != nil {
		return nil, fmt.Errorf("tool %q: %s schema does not compile: %w", tool, which, err)
	}
	return s, nil
}

// CheckSchemas compiles spec's input schema and, when it has one, its
// output schema, as NewRegistry does for a tool without SchemasFixed. The
// tests of a tool that sets SchemasFixed call it, so a schema that does not
// compile fails a test rather than a user's first call.
func CheckSchemas(spec Spec) error {
	if _, err := compileObjectSchema(spec.Name, "input", spec.InputSchema); err != nil {
		return err
	}
	if spec.OutputSchema != nil {
		if _, err := compileObjectSchema(spec.Name, "output", spec.OutputSchema); err != nil {
			return err
		}
	}
	return nil
}

// Lookup finds a tool by its exact name.
func (r *Registry) Lookup(name string) (*Entry, bool) {
	if r == nil {
		return nil, false
	}
	e, ok := r.byName[name]
	return e, ok
}

// Len is the number of tools.
func (r *Registry) Len() int {
	if r == nil {
		return 0
	}
	return len(r.entries)
}

// Page returns up to limit tool descriptions starting at offset, in name
// order, and whether more follow.
func (r *Registry) Page(offset, limit int) ([]protocol.Tool, bool) {
	if r == nil || offset >= len(r.entries) {
		return []protocol.Tool{}, false
	}
	end := min(offset+limit, len(r.entries))
	out := make([]protocol.Tool, 0, end-offset)
	for _, e := range r.entries[offset:end] {
		out = append(out, e.wire)
	}
	return out, end < len(r.entries)
}

// Spec is the entry's tool spec.
func (e *Entry) Spec() Spec { return e.spec }

// Fingerprint identifies the tool as clients see it (name, description,
// schemas, annotations, _meta — which includes a command tool's command):
// a trust a person gave a tool is kept across a reload only while the
// fingerprint stays the same.
func (e *Entry) Fingerprint() [sha256.Size]byte { return e.print }

// Check checks args (a JSON value; empty or null means {}) against the
// input schema and returns them in both forms a call needs: the JSON text
// the tool decodes and the value the schema saw, which the gate's hash
// encodes (gate.Call.Decoded) rather than parsing the text again. A
// failure is an invalid_argument *Error that lists every violation with
// its location, so the model can fix them all at once.
func (e *Entry) Check(args json.RawMessage) (Arguments, error) {
	if isEmptyArgs(args) {
		args = json.RawMessage("{}")
	}
	inst, err := jsonvalue.Decode(args)
	if err != nil {
		return Arguments{}, Errorf(KindInvalidArgument, "arguments are not valid JSON")
	}
	obj, ok := inst.(map[string]any)
	if !ok {
		return Arguments{}, Errorf(KindInvalidArgument, "arguments must be a JSON object")
	}
	if e.input != nil { // else the tool's own server checks its arguments
		schema, err := e.input()
		if err != nil { // a fixed schema that does not compile: CheckSchemas in the tool's tests prevents it
			return Arguments{}, Errorf(KindInternal, "the input schema of %s does not compile", e.spec.Name)
		}
		if err := schema.Validate(obj); err != nil {
			ve, ok := err.(*jsonschema.ValidationError)
			if !ok {
				return Arguments{}, Errorf(KindInvalidArgument, "arguments rejected: %v", err)
			}
			return Arguments{}, &Error{Kind: KindInvalidArgument, Message: describeViolations(e.spec.Name, ve)}
		}
	}
	return Arguments{Raw: args, Value: obj}, nil
}

// Validate is Check for callers that need only the arguments' text
// (examples, tests). The runtime uses Check and gives its Value to the
// gate's hash (gate.Call.Decoded), so the arguments are parsed once.
func (e *Entry) Validate(args json.RawMessage) (json.RawMessage, error) {
	a, err := e.Check(args)
	return a.Raw, err
}

// isEmptyArgs reports whether args are absent: empty, white space or null.
func isEmptyArgs(args json.RawMessage) bool {
	t := bytes.TrimSpace(args)
	return len(t) == 0 || string(t) == "null"
}

func describeViolations(tool string, ve *jsonschema.ValidationError) string {
	var lines []string
	for _, u := range ve.BasicOutput().Errors {
		if u.Error == nil {
			continue
		}
		msg := u.Error.String()
		if strings.HasPrefix(msg, "validation failed") {
			continue // the summary line of a nested group, not a violation
		}
		loc := u.InstanceLocation
		if loc == "" {
			loc = "(root)"
		}
		line := "  - at " + loc + ": " + msg
		if !slices.Contains(lines, line) {
			lines = append(lines, line)
		}
	}
	if len(lines) == 0 {
		lines = append(lines, "  - "+ve.Error())
	}
	return fmt.Sprintf("invalid arguments for %s:\n%s", tool, strings.Join(lines, "\n"))
}

// maxWarnedOnce bounds the warnings a WarnOnce logger remembers; past it
// the memory starts over (a warning may then repeat, never grow memory).
const maxWarnedOnce = 4096

// WarnOnce returns a logger that writes each distinct warning (level,
// message and attributes; warn and above) once, and everything below warn
// as log does. troupe rebuilds its registry whenever a downstream server's
// tools change and at each reload: the naming warnings of a build (names
// Codex changes, collisions, tools left out) go through one WarnOnce
// logger, so each problem is reported once rather than at every build.
// The logger is safe for concurrent use.
func WarnOnce(log *slog.Logger) *slog.Logger {
	return slog.New(&onceHandler{next: log.Handler(), seen: &warnedSet{m: map[string]struct{}{}}})
}

// warnedSet is what a WarnOnce logger and the loggers derived from it
// (With, WithGroup) have written.
type warnedSet struct {
	mu sync.Mutex
	m  map[string]struct{}
}

// first records key and reports whether it is new.
func (w *warnedSet) first(key string) bool {
	w.mu.Lock()
	defer w.mu.Unlock()
	if _, ok := w.m[key]; ok {
		return false
	}
	if len(w.m) >= maxWarnedOnce {
		clear(w.m)
	}
	w.m[key] = struct{}{}
	return true
}

type onceHandler struct {
	next   slog.Handler
	seen   *warnedSet
	prefix string // the attributes and groups of With and WithGroup, as text
}

func (h *onceHandler) Enabled(ctx context.Context, l slog.Level) bool { return h.next.Enabled(ctx, l) }

func (h *onceHandler) Handle(ctx context.Context, r slog.Record) error {
	if r.Level >= slog.LevelWarn {
		var b strings.Builder
		b.WriteString(h.prefix)
		fmt.Fprintf(&b, "\x00%d\x00%s", r.Level, r.Message)
		r.Attrs(func(a slog.Attr) bool {
			fmt.Fprintf(&b, "\x00%s=%v", a.Key, a.Value.Resolve())
			return true
		})
		if !h.seen.first(b.String()) {
			return nil
		}
	}
	return h.next.Handle(ctx, r)
}

func (h *onceHandler) WithAttrs(as []slog.Attr) slog.Handler {
	var b strings.Builder
	b.WriteString(h.prefix)
	for _, a := range as {
		fmt.Fprintf(&b, "\x00%s=%v", a.Key, a.Value.Resolve())
	}
	return &onceHandler{next: h.next.WithAttrs(as), seen: h.seen, prefix: b.String()}
}

func (h *onceHandler) WithGroup(name string) slog.Handler {
	return &onceHandler{next: h.next.WithGroup(name), seen: h.seen, prefix: h.prefix + "\x00[" + name + "]"}
}
