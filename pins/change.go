package pins

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strings"

	"troupe/gate"
)

// Change is what differs between a pinned version and the one listed now.
type Change struct {
	// Fields names the members that differ, in Def's order: "title",
	// "description", "input schema", "output schema", "annotations",
	// "arguments".
	Fields []string
	// Lines is a diff of those members for a person: a header line per
	// member, then its lines prefixed "- " (pinned) and "+ " (listed
	// now), schemas indented one member per line. Every line went
	// through gate.Printable: bidi, zero-width and control characters are
	// shown as escapes, so the diff reads as what the model reads. A
	// long diff is cut to maxDiffLines with a line saying how much more
	// there was.
	Lines []string
	// Note, when set, is what Summary says instead of naming fields: the
	// pins could not be read, so nothing listed can be called unchanged
	// (Unreadable).
	Note string
}

// Unreadable is the Change of everything a server lists while the pins
// cannot be read: troupe cannot tell what changed, so it trusts nothing.
var Unreadable = Change{Note: "troupe cannot read its pins, so it cannot tell what changed"}

// maxDiffLines bounds Change.Lines: enough for a description and a schema,
// not a page a prompt could drown in.
const maxDiffLines = 120

// Compare is the change from pinned to now; its Fields are empty when the
// two are the same.
func Compare(pinned, now Def) Change {
	var c Change
	field := func(name, from, to string) {
		if from == to {
			return
		}
		c.Fields = append(c.Fields, name)
		c.Lines = append(c.Lines, name+":")
		c.Lines = append(c.Lines, lineDiff(strings.Split(from, "\n"), strings.Split(to, "\n"))...)
	}
	field("title", pinned.Title, now.Title)
	field("description", pinned.Description, now.Description)
	field("input schema", indented(pinned.InputSchema), indented(now.InputSchema))
	field("output schema", indented(pinned.OutputSchema), indented(now.OutputSchema))
	field("annotations", indented(pinned.Annotations), indented(now.Annotations))
	field("arguments", indented(pinned.Arguments), indented(now.Arguments))
	for i, l := range c.Lines {
		c.Lines[i] = gate.Printable(l)
	}
	if n := len(c.Lines); n > maxDiffLines {
		c.Lines = append(c.Lines[:maxDiffLines-1:maxDiffLines-1], fmt.Sprintf("… %d more lines", n-maxDiffLines+1))
	}
	return c
}

// Summary says in a few words what changed: "description and input
// schema changed"; "" when nothing did.
func (c Change) Summary() string {
	if c.Note != "" {
		return c.Note
	}
	switch n := len(c.Fields); n {
	case 0:
		return ""
	case 1:
		return c.Fields[0] + " changed"
	default:
		return strings.Join(c.Fields[:n-1], ", ") + " and " + c.Fields[n-1] + " changed"
	}
}

// Text is Lines as one text, a line each.
func (c Change) Text() string { return strings.Join(c.Lines, "\n") }

// indented is canonical JSON raw indented one member per line, "" when
// absent.
func indented(raw json.RawMessage) string {
	if len(raw) == 0 {
		return ""
	}
	var b bytes.Buffer
	if json.Indent(&b, raw, "", "  ") != nil {
		return string(raw)
	}
	return b.String()
}

// maxDiffInput bounds the lines lineDiff aligns (its table is the product
// of both sides): past it, the sides are shown whole, removed then added.
const maxDiffInput = 2000

// lineDiff is the lines of from and to as a person reads a diff: lines
// both share as "  ", lines only from has as "- ", lines only to has as
// "+ ", aligned by their longest common subsequence. Shared lines far
// from a change are left out ("  …"), so the diff shows the change with
// two lines of context.
func lineDiff(from, to []string) []string {
	if len(from) == 1 && from[0] == "" {
		from = nil
	}
	if len(to) == 1 && to[0] == "" {
		to = nil
	}
	type op struct {
		mark byte
		line string
	}
	var ops []op
	if len(from)*len(to) > maxDiffInput*maxDiffInput/4 || len(from) > maxDiffInput || len(to) > maxDiffInput {
		for _, l := range from {
			ops = append(ops, op{'-', l})
		}
		for _, l := range to {
			ops = append(ops, op{'+', l})
		}
	} else {
		// lcs[i][j] is the longest common subsequence of from[i:], to[j:].
		lcs := make([][]int, len(from)+1)
		for i := range lcs {
			lcs[i] = make([]int, len(to)+1)
		}
		for i := len(from) - 1; i >= 0; i-- {
			for j := len(to) - 1; j >= 0; j-- {
				if from[i] == to[j] {
					lcs[i][j] = lcs[i+1][j+1] + 1
				} else {
					lcs[i][j] = max(lcs[i+1][j], lcs[i][j+1])
				}
			}
		}
		i, j := 0, 0
		for i < len(from) || j < len(to) {
			switch {
			case i < len(from) && j < len(to) && from[i] == to[j]:
				ops = append(ops, op{' ', from[i]})
				i, j = i+1, j+1
			case j < len(to) && (i == len(from) || lcs[i][j+1] >= lcs[i+1][j]):
				ops = append(ops, op{'+', to[j]})
				j++
			default:
				ops = append(ops, op{'-', from[i]})
				i++
			}
		}
	}
	const context = 2
	near := func(k int) bool {
		for d := max(0, k-context); d <= min(len(ops)-1, k+context); d++ {
			if ops[d].mark != ' ' {
				return true
			}
		}
		return false
	}
	var out []string
	skipped := false
	for k, o := range ops {
		if o.mark == ' ' && !near(k) {
			if !skipped {
				out = append(out, "  …")
				skipped = true
			}
			continue
		}
		skipped = false
		out = append(out, string(o.mark)+" "+o.line)
	}
	return out
}
