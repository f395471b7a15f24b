package config

import (
	"fmt"
	"maps"
	"reflect"
	"slices"
	"strings"
	"time"
)

// issue is one problem a layer has by itself: an unknown key or a value of
// the wrong type, found by walking the layer against Config's fields (their
// koanf tags), so every problem is reported with its full key, not only the
// first one mapstructure stops at.
type issue struct {
	path    []string
	value   any // the offending value; nil for unknown keys
	problem string
	suggest []string // the nearest known key, or nil
	note    string
}

var (
	configType      = reflect.TypeFor[Config]()
	durationType    = reflect.TypeFor[time.Duration]()
	commandToolType = reflect.TypeFor[CommandTool]()
	mcpServerType   = reflect.TypeFor[McpServer]()
)

// checkLayer lists every unknown key and wrongly typed value in one layer.
func checkLayer(data map[string]any) []issue {
	var out []issue
	checkTable(configType, data, nil, &out)
	return out
}

// fields maps a struct's koanf keys to their types.
func fields(t reflect.Type) map[string]reflect.Type {
	m := map[string]reflect.Type{}
	for f := range t.Fields() {
		tag := f.Tag.Get("koanf")
		if !f.IsExported() || tag == "" || tag == "-" {
			continue
		}
		m[tag] = f.Type
	}
	return m
}

func checkTable(t reflect.Type, data map[string]any, path []string, out *[]issue) {
	known := fields(t)
	for _, k := range sortedKeys(data) {
		p := append(slices.Clone(path), k)
		ft, ok := known[k]
		if !ok {
			*out = append(*out, unknownKey(t, p, data[k]))
			continue
		}
		checkValue(ft, data[k], p, out)
	}
}

func sortedKeys(m map[string]any) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return keys
}

// checkValue checks that v (as go-toml decoded it) fits a field of type t.
func checkValue(t reflect.Type, v any, path []string, out *[]issue) {
	bad := func(want string) {
		*out = append(*out, issue{path: path, value: v, problem: "want " + want + ", got " + describe(v)})
	}
	if t == durationType {
		s, ok := v.(string)
		if !ok {
			bad(`a duration such as "90s", "5m" or "1h30m"`)
			return
		}
		if _, err := time.ParseDuration(s); err != nil {
			*out = append(*out, issue{path: path, value: v,
				problem: `not a duration: write a number and a unit (ns, us, ms, s, m, h), such as "90s", "5m" or "1h30m"`})
		}
		return
	}
	switch t.Kind() {
	case reflect.Pointer:
		checkValue(t.Elem(), v, path, out)
	case reflect.Interface:
		// any value (schemas: an inline table or JSON text, checked later)
	case reflect.String:
		if _, ok := v.(string); !ok {
			bad("a string")
		}
	case reflect.Bool:
		if _, ok := v.(bool); !ok {
			bad("true or false")
		}
	case reflect.Int, reflect.Int64:
		if _, ok := v.(int64); !ok {
			bad("an integer")
		}
	case reflect.Float64:
		switch v.(type) {
		case int64, float64:
		default:
			bad("a number")
		}
	case reflect.Slice:
		items, ok := v.([]any)
		if !ok {
			if _, table := v.(map[string]any); table && isTables(t) {
				*out = append(*out, issue{path: path, value: v, problem: "want an array of tables, got a table",
					note: fmt.Sprintf("write each entry as [[%s]] in the file; a -c flag or an environment variable sets the whole array, as in %s=[{…}, {…}]", dotted(path), dotted(path))})
				return
			}
			bad("an array")
			return
		}
		if isTables(t) {
			// Each entry is a table of its own: its keys are checked one by
			// one and named auth.tokens[2].name.
			for i, it := range items {
				checkValue(t.Elem(), it, append(slices.Clone(path), entryPart(i+1)), out)
			}
			return
		}
		for i, it := range items {
			var sub []issue
			checkValue(t.Elem(), it, path, &sub)
			if len(sub) > 0 {
				*out = append(*out, issue{path: path, value: v,
					problem: fmt.Sprintf("item %d: %s", i+1, sub[0].problem)})
				return
			}
		}
	case reflect.Map:
		m, ok := v.(map[string]any)
		if !ok {
			bad("a table")
			return
		}
		for _, k := range sortedKeys(m) {
			checkValue(t.Elem(), m[k], append(slices.Clone(path), k), out)
		}
	case reflect.Struct:
		m, ok := v.(map[string]any)
		if !ok {
			bad("a table")
			return
		}
		checkTable(t, m, path, out)
	default:
		bad(t.String())
	}
}

// isTables reports whether a field of type t is an array of tables
// ([[auth.tokens]]).
func isTables(t reflect.Type) bool {
	return t.Kind() == reflect.Slice && t.Elem().Kind() == reflect.Struct
}

// unknownKey explains a key the table of type t does not have, with the
// nearest key it does have, or the table where that key lives.
func unknownKey(t reflect.Type, path []string, v any) issue {
	k := path[len(path)-1]
	parent := path[:len(path)-1]
	is := issue{path: path, problem: "unknown key"}
	if _, table := v.(map[string]any); table && len(parent) == 0 {
		is.problem = "unknown table"
	}
	if near := nearest(k, slices.Sorted(mapKeys(fields(t)))); near != "" {
		is.suggest = append(slices.Clone(parent), near)
		return is
	}
	// A key of the other kind of [mcp…] table: a common mix-up.
	switch {
	case t == commandToolType && fields(mcpServerType)[k] != nil:
		is.note = fmt.Sprintf("%s is a key of [mcp_servers.<name>], for downstream MCP servers; [mcp.<name>] declares a command tool", k)
		return is
	case t == mcpServerType && fields(commandToolType)[k] != nil:
		is.note = fmt.Sprintf("%s is a key of [mcp.<name>], for command tools; [mcp_servers.<name>] declares a downstream MCP server", k)
		return is
	}
	// The same key in another table: put in the wrong one.
	for _, full := range knownKeys(configType, nil) {
		if full[len(full)-1] == k && len(full) > 1 && !slices.Contains(full, "<name>") {
			is.suggest = full
			return is
		}
	}
	return is
}

func mapKeys(m map[string]reflect.Type) func(func(string) bool) {
	return func(yield func(string) bool) {
		for k := range m {
			if !yield(k) {
				return
			}
		}
	}
}

// knownKeys lists every key troupe knows below t, in a stable order;
// map entries are shown as "<name>".
func knownKeys(t reflect.Type, prefix []string) [][]string {
	var out [][]string
	f := fields(t)
	for _, k := range slices.Sorted(mapKeys(f)) {
		p := append(slices.Clone(prefix), k)
		ft := f[k]
		switch {
		case ft.Kind() == reflect.Struct && ft != durationType:
			out = append(out, knownKeys(ft, p)...)
		case ft.Kind() == reflect.Map && ft.Elem().Kind() == reflect.Struct:
			out = append(out, knownKeys(ft.Elem(), append(p, "<name>"))...)
		default:
			out = append(out, p)
		}
	}
	return out
}

// nearest returns the candidate closest to key by edit distance (case
// ignored), when it is close enough to be a slip: at most a third of the
// key's length, and at least 1.
func nearest(key string, candidates []string) string {
	limit := max(1, min(3, len(key)/3))
	best, bestD := "", limit+1
	lk := strings.ToLower(key)
	for _, c := range candidates {
		if d := editDistance(lk, strings.ToLower(c)); d < bestD {
			best, bestD = c, d
		}
	}
	return best
}

// editDistance is the optimal-string-alignment distance: insertions,
// deletions, substitutions and transpositions of neighbours cost 1 each.
func editDistance(a, b string) int {
	ra, rb := []rune(a), []rune(b)
	prev2 := make([]int, len(rb)+1)
	prev := make([]int, len(rb)+1)
	cur := make([]int, len(rb)+1)
	for j := range prev {
		prev[j] = j
	}
	for i := 1; i <= len(ra); i++ {
		cur[0] = i
		for j := 1; j <= len(rb); j++ {
			cost := 1
			if ra[i-1] == rb[j-1] {
				cost = 0
			}
			cur[j] = min(prev[j]+1, cur[j-1]+1, prev[j-1]+cost)
			if i > 1 && j > 1 && ra[i-1] == rb[j-2] && ra[i-2] == rb[j-1] {
				cur[j] = min(cur[j], prev2[j-2]+1)
			}
		}
		prev2, prev, cur = prev, cur, prev2
	}
	return prev[len(rb)]
}

// checkSources checks every layer alone and returns all their problems,
// a file's in line order. It takes the keys at fault out of each layer, so
// the rest can still be merged and validated, and returns what it took out.
func checkSources(sources []source) (errs Errors, dropped []droppedKey) {
	for i := range sources {
		s := &sources[i]
		var found Errors
		for _, is := range checkLayer(s.data) {
			found = append(found, s.locate(is.path, is.value, is.problem, is.suggest, is.note))
			s.data = without(s.data, is.path)
			dropped = append(dropped, droppedKey{path: is.path, unknown: is.value == nil})
		}
		slices.SortStableFunc(found, func(a, b *Error) int { return a.Line - b.Line })
		errs = append(errs, found...)
	}
	return errs, dropped
}

// droppedKey is a key checkSources took out of a layer: unknown, or a
// value of the wrong type.
type droppedKey struct {
	path    []string
	unknown bool
}

// repeats reports whether a validation problem about the key at path
// (set by no layer when !set) only repeats this one: a value dropped for
// its type falls back to its default, so a problem about it or its table
// says nothing new; a misspelt key leaves the key it meant unset, so
// "is required" beside it, or about its table, says nothing new either.
func (d droppedKey) repeats(path []string, set bool) bool {
	if !d.unknown {
		n := min(len(d.path), len(path))
		return slices.Equal(d.path[:n], path[:n])
	}
	parent := d.path[:len(d.path)-1]
	return !set && len(parent) > 0 && (slices.Equal(parent, path) || slices.Equal(parent, path[:len(path)-1]))
}

// without returns data without the key at path, copying the tables (and
// arrays of tables) on the way so the layer's other readers keep what was
// written.
func without(data map[string]any, path []string) map[string]any {
	out := maps.Clone(data)
	if len(path) == 1 {
		delete(out, path[0])
		return out
	}
	switch sub := out[path[0]].(type) {
	case map[string]any:
		out[path[0]] = without(sub, path[1:])
	case []any:
		i, entry := entryIndex(path[1])
		if !entry || i >= len(sub) {
			break
		}
		items := slices.Clone(sub)
		if len(path) == 2 {
			// Emptied, not removed, so the later entries keep their numbers.
			items[i] = map[string]any{}
		} else if m, ok := items[i].(map[string]any); ok {
			items[i] = without(m, path[2:])
		}
		out[path[0]] = items
	}
	return out
}
