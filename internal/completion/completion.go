// Package completion writes shell completion scripts (bash, zsh, fish) for
// a command line made of nested subcommands, each with its own flags.
//
// The caller describes its commands once, from the same table its help is
// made from, so completion can never offer a flag the command does not
// take:
//
//	cmds := []completion.Command{
//		{Path: "serve", Summary: "serve MCP", Flags: []completion.Flag{{Name: "workspace", Arg: "DIR"}}},
//		{Path: "config", Summary: "the configuration"},
//		{Path: "config check", Summary: "check it", Flags: []completion.Flag{{Name: "config", Arg: "FILE"}}},
//	}
//	completion.Write(os.Stdout, "bash", "troupe", cmds)
//
// Every script works the same way: it walks the words typed so far,
// skipping flags (and the value of a flag that takes one), to find the
// deepest command named; then it offers that command's subcommands or
// argument choices, or, after "-", its flags; after a flag whose value is
// a FILE or DIR, paths.
package completion

import (
	"fmt"
	"io"
	"regexp"
	"slices"
	"sort"
	"strings"
)

// Command is one command: the words that name it and what it takes.
type Command struct {
	// Path is the words after the program's name, space-separated:
	// "serve", "config check". Every prefix of a path must be a Command
	// too (its Subcommands are the commands one word longer).
	Path string
	// Summary is one line, shown beside the name by zsh and fish.
	Summary string
	// Flags are the command's flags.
	Flags []Flag
	// Args are the choices for its first positional argument (bench's
	// modes, completion's shells), if it has a fixed set.
	Args []string
	// Files says the positional arguments are paths (audit verify FILE).
	Files bool
}

// Flag is one flag of a command.
type Flag struct {
	// Name without dashes; a one-letter name is written "-c", a longer
	// one "--name".
	Name string
	// Arg names the value, as the help shows it ("DIR", "FILE", "URL");
	// "" for a flag that takes none (a boolean).
	Arg string
	// Usage is the help's one line, shown by zsh and fish.
	Usage string
}

// Spelled is the flag as typed: "--workspace" or "-c".
func (f Flag) Spelled() string {
	if len(f.Name) == 1 {
		return "-" + f.Name
	}
	return "--" + f.Name
}

// Shells are the shells Write knows.
var Shells = []string{"bash", "zsh", "fish"}

// Write writes the completion script of shell for program prog.
func Write(w io.Writer, shell, prog string, cmds []Command) error {
	if err := check(prog, cmds); err != nil {
		return err
	}
	t := newTree(cmds)
	switch shell {
	case "bash":
		return writeBash(w, prog, t)
	case "zsh":
		return writeZsh(w, prog, t)
	case "fish":
		return writeFish(w, prog, t)
	}
	return fmt.Errorf("no completion for shell %q (want one of %s)", shell, strings.Join(Shells, ", "))
}

// safeWord is what a program, command or flag name may be: the scripts
// embed them unquoted in case patterns and word lists.
var safeWord = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9_.-]*$`)

// check refuses names the scripts could not embed as words.
func check(prog string, cmds []Command) error {
	if !safeWord.MatchString(prog) {
		return fmt.Errorf("program name %q is not a plain word", prog)
	}
	for _, c := range cmds {
		for _, w := range strings.Fields(c.Path) {
			if !safeWord.MatchString(w) {
				return fmt.Errorf("command %q: %q is not a plain word", c.Path, w)
			}
		}
		for _, a := range c.Args {
			if !safeWord.MatchString(a) {
				return fmt.Errorf("command %q: argument %q is not a plain word", c.Path, a)
			}
		}
		for _, f := range c.Flags {
			if !safeWord.MatchString(f.Name) {
				return fmt.Errorf("command %q: flag %q is not a plain word", c.Path, f.Name)
			}
		}
	}
	return nil
}

// node is a command with its subcommands' last words.
type node struct {
	Command
	subs []string
}

// tree is the commands by path, the root ("") included.
type tree struct {
	nodes map[string]*node
	paths []string // sorted, root first
}

func newTree(cmds []Command) *tree {
	t := &tree{nodes: map[string]*node{"": {}}}
	for _, c := range cmds {
		c.Path = strings.Join(strings.Fields(c.Path), " ")
		if n, ok := t.nodes[c.Path]; ok {
			n.Command = c
		} else {
			t.nodes[c.Path] = &node{Command: c}
		}
		// Every prefix is a command, named or not.
		words := strings.Fields(c.Path)
		for i := len(words) - 1; i >= 0; i-- {
			parent := strings.Join(words[:i], " ")
			p, ok := t.nodes[parent]
			if !ok {
				p = &node{Command: Command{Path: parent}}
				t.nodes[parent] = p
			}
			if !slices.Contains(p.subs, words[i]) {
				p.subs = append(p.subs, words[i])
			}
		}
	}
	for p := range t.nodes {
		t.paths = append(t.paths, p)
	}
	sort.Strings(t.paths)
	return t
}

// summary is the summary of the subcommand sub of path.
func (t *tree) summary(path, sub string) string {
	if path != "" {
		sub = path + " " + sub
	}
	return t.nodes[sub].Summary
}

// valued are the spellings of n's flags that take a value, and of those
// the ones whose value is a directory or a file.
func (n *node) valued() (all, dirs, files []string) {
	for _, f := range n.Flags {
		if f.Arg == "" {
			continue
		}
		all = append(all, f.Spelled())
		switch f.Arg {
		case "DIR":
			dirs = append(dirs, f.Spelled())
		case "FILE":
			files = append(files, f.Spelled())
		}
	}
	return all, dirs, files
}

// spelled is every flag of n as typed.
func (n *node) spelled() []string {
	var s []string
	for _, f := range n.Flags {
		s = append(s, f.Spelled())
	}
	return s
}
