package command

import (
	"bytes"
	"encoding/json"
	"fmt"
	"slices"
	"strings"

	"troupe/tools"
)

// argTemplate is one element of Definition.Args, split into literal text
// and placeholders.
type argTemplate struct {
	text  string    // the element as configured, for messages
	parts []argPart // literal runs and placeholders, in order
}

// argPart is a literal run (name == "") or a placeholder.
type argPart struct {
	lit  string
	name string
}

// wholeName is the placeholder's name when the element is one placeholder
// and nothing else ("{paths}").
func (a argTemplate) wholeName() (string, bool) {
	if len(a.parts) == 1 && a.parts[0].name != "" {
		return a.parts[0].name, true
	}
	return "", false
}

// names lists the placeholders of the element.
func (a argTemplate) names() []string {
	var ns []string
	for _, p := range a.parts {
		if p.name != "" {
			ns = append(ns, p.name)
		}
	}
	return ns
}

// parseArg splits one configured argv element. "{name}" is a placeholder,
// "{{" and "}}" are literal braces, and any other brace is an error, so a
// mistyped placeholder is caught when the tool is built instead of being
// passed on literally.
func parseArg(s string) (argTemplate, error) {
	a := argTemplate{text: s}
	var lit strings.Builder
	flush := func() {
		if lit.Len() > 0 {
			a.parts = append(a.parts, argPart{lit: lit.String()})
			lit.Reset()
		}
	}
	for i := 0; i < len(s); {
		switch c := s[i]; {
		case c == '{' && strings.HasPrefix(s[i:], "{{"):
			lit.WriteByte('{')
			i += 2
		case c == '}' && strings.HasPrefix(s[i:], "}}"):
			lit.WriteByte('}')
			i += 2
		case c == '{':
			end := strings.IndexByte(s[i+1:], '}')
			if end < 0 {
				return a, fmt.Errorf("argument %q: \"{\" is not closed (write \"{{\" for a literal brace)", s)
			}
			name := s[i+1 : i+1+end]
			if err := checkPlaceholder(name); err != nil {
				return a, fmt.Errorf("argument %q: %w", s, err)
			}
			flush()
			a.parts = append(a.parts, argPart{name: name})
			i += end + 2
		case c == '}':
			return a, fmt.Errorf("argument %q: \"}\" closes nothing (write \"}}\" for a literal brace)", s)
		default:
			lit.WriteByte(c)
			i++
		}
	}
	flush()
	return a, nil
}

// checkPlaceholder accepts the names a placeholder may carry: the
// characters of tool names, which cover the usual property names.
func checkPlaceholder(name string) error {
	if name == "" {
		return fmt.Errorf("\"{}\" names no argument (write \"{{}}\" for literal braces)")
	}
	for _, c := range name {
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '_' || c == '-' || c == '.') {
			return fmt.Errorf("placeholder {%s}: character %q is not one of A-Z a-z 0-9 _ - . (write \"{{\" and \"}}\" for literal braces)", name, c)
		}
	}
	return nil
}

// checkTemplates makes sure every placeholder names a property of the
// input schema, and that a property that may be an array fills whole
// elements only.
func checkTemplates(tmpls []argTemplate, props map[string]json.RawMessage) error {
	for _, a := range tmpls {
		_, whole := a.wholeName()
		for _, name := range a.names() {
			prop, ok := props[name]
			if !ok {
				return fmt.Errorf("argument %q: placeholder {%s} is not a property of the input schema", a.text, name)
			}
			if !whole && mayBeArray(prop) {
				return fmt.Errorf("argument %q: {%s} can be an array, and an array can only fill a whole argument (\"{%s}\" alone)", a.text, name, name)
			}
		}
	}
	return nil
}

// mayBeArray reports whether a property schema declares "array" among its
// types.
func mayBeArray(prop json.RawMessage) bool {
	var s struct {
		Type json.RawMessage `json:"type"`
	}
	if json.Unmarshal(prop, &s) != nil || s.Type == nil {
		return false
	}
	var one string
	if json.Unmarshal(s.Type, &one) == nil {
		return one == "array"
	}
	var many []string
	return json.Unmarshal(s.Type, &many) == nil && slices.Contains(many, "array")
}

// expandArgs builds the argv that follows the program from the templates
// and the call's arguments (see "Arguments" in the package doc).
func expandArgs(tmpls []argTemplate, args map[string]json.RawMessage) ([]string, error) {
	argv := make([]string, 0, len(tmpls))
	for _, a := range tmpls {
		if name, ok := a.wholeName(); ok {
			v, present := args[name]
			switch {
			case !present || isNull(v):
				// An optional argument left out: the element goes too.
			case v[0] == '[':
				var items []json.RawMessage
				if err := json.Unmarshal(v, &items); err != nil {
					return nil, tools.Errorf(tools.KindInvalidArgument, "argument %q is not valid JSON", name)
				}
				for _, item := range items {
					s, err := argText(name, item)
					if err != nil {
						return nil, err
					}
					argv = append(argv, s)
				}
			default:
				s, err := argText(name, v)
				if err != nil {
					return nil, err
				}
				argv = append(argv, s)
			}
			continue
		}
		var b strings.Builder
		for _, p := range a.parts {
			if p.name == "" {
				b.WriteString(p.lit)
				continue
			}
			v, present := args[p.name]
			if !present || isNull(v) {
				continue // an optional argument left out: ""
			}
			if v[0] == '[' {
				return nil, tools.Errorf(tools.KindInvalidArgument,
					"argument %q is an array, but it fills only part of the program argument %q; send a single value", p.name, a.text)
			}
			s, err := argText(p.name, v)
			if err != nil {
				return nil, err
			}
			b.WriteString(s)
		}
		argv = append(argv, b.String())
	}
	return argv, nil
}

func isNull(v json.RawMessage) bool { return len(v) == 0 || string(v) == "null" }

// argText renders one JSON value as program argument text: strings as they
// are, numbers and booleans as their JSON text, objects and arrays as
// compact JSON.
func argText(name string, v json.RawMessage) (string, error) {
	var s string
	switch v[0] {
	case '"':
		if err := json.Unmarshal(v, &s); err != nil {
			return "", tools.Errorf(tools.KindInvalidArgument, "argument %q is not a valid JSON string", name)
		}
	case '{', '[':
		var b bytes.Buffer
		if err := json.Compact(&b, v); err != nil {
			return "", tools.Errorf(tools.KindInvalidArgument, "argument %q is not valid JSON", name)
		}
		s = b.String()
	default: // numbers, true, false: the JSON text, as the client wrote it
		s = string(v)
	}
	if strings.IndexByte(s, 0) >= 0 {
		return "", tools.Errorf(tools.KindInvalidArgument,
			"argument %q contains a NUL character, which cannot be passed to a program", name)
	}
	return s, nil
}
