package main

import (
	"flag"
	"io"
	"strings"

	"troupe/internal/completion"
	"troupe/loadgen"
)

// commandSpec is one command line troupe takes, for its help and for
// completion: the help text, and the flags as the command itself declares
// them (the same function), so neither can drift from what it parses.
type commandSpec struct {
	help  cmdHelp
	flags func() *flag.FlagSet
	args  []string // the choices of its first positional argument, if fixed
	files bool     // its positional arguments are paths
}

// commandTable is every command troupe takes.
func commandTable() []commandSpec {
	table := []commandSpec{
		{help: serveCommandHelp(), flags: func() *flag.FlagSet { fs, _ := serveFlags(); return fs }},
		{help: configCheckHelp(), flags: func() *flag.FlagSet { return configCheckFlags().fs }},
		{help: toolsHelp(), flags: func() *flag.FlagSet { c, _, _ := toolsFlags(); return c.fs }},
		{help: codexConfigHelp(), flags: func() *flag.FlagSet { c, _, _ := codexConfigFlags(); return c.fs }},
		{help: auditVerifyHelp(), flags: func() *flag.FlagSet { return auditVerifyFlags().fs }, files: true},
		{help: benchHelp(), flags: func() *flag.FlagSet { fs, _ := benchFlags(); return fs },
			args: []string{string(loadgen.ModeThroughput), string(loadgen.ModeSessions), string(loadgen.ModeSoak)}},
		{help: versionHelp(), flags: func() *flag.FlagSet { return newFlagSet(versionHelp()) }},
		{help: completionHelp(), flags: func() *flag.FlagSet { return newFlagSet(completionHelp()) }, args: completion.Shells},
	}
	// "troupe help COMMAND" takes the first word of each.
	var names []string
	for _, c := range table {
		if n := strings.Fields(c.help.name)[0]; len(names) == 0 || names[len(names)-1] != n {
			names = append(names, n)
		}
	}
	return append(table, commandSpec{help: cmdHelp{name: "help", summary: "show the overview, or a command's help"},
		flags: func() *flag.FlagSet { return newFlagSet(cmdHelp{name: "help"}) }, args: names})
}

func completionHelp() cmdHelp {
	return cmdHelp{name: "completion", args: "bash|zsh|fish", summary: "print a shell completion script",
		desc: `Prints a script that completes troupe's commands and their flags (and
paths after --workspace, --config and other FILE or DIR flags) in bash, zsh
or fish. It is generated from the same table as the help, so it offers
exactly the flags each command takes.`,
		example: `source <(troupe completion bash)        # in ~/.bashrc
source <(troupe completion zsh)         # in ~/.zshrc, after compinit
troupe completion fish > ~/.config/fish/completions/troupe.fish`}
}

// completionCommand is "troupe completion bash|zsh|fish".
func completionCommand(args []string, stdout, stderr io.Writer) int {
	help := completionHelp()
	fs := newFlagSet(help)
	if code, ok := parseFlags(fs, help, args, stdout, stderr); !ok {
		return code
	}
	if fs.NArg() != 1 {
		return usageError(stderr, help, "name one shell: %s", strings.Join(completion.Shells, ", "))
	}
	if err := completion.Write(stdout, fs.Arg(0), "troupe", completionCommands()); err != nil {
		return usageError(stderr, help, "%v", err)
	}
	return exitOK
}

// completionCommands is commandTable as package completion takes it; a
// two-word command ("config check") also names its first word, which
// shares its summary.
func completionCommands() []completion.Command {
	var out []completion.Command
	seen := map[string]bool{}
	for _, c := range commandTable() {
		words := strings.Fields(c.help.name)
		if len(words) > 1 && !seen[words[0]] {
			seen[words[0]] = true
			out = append(out, completion.Command{Path: words[0], Summary: c.help.summary})
		}
		cmd := completion.Command{Path: c.help.name, Summary: c.help.summary, Args: c.args, Files: c.files}
		c.flags().VisitAll(func(f *flag.Flag) {
			arg, usage := flag.UnquoteUsage(f)
			if isBool(f) {
				arg = ""
			} else if arg == "" {
				arg = "VALUE"
			}
			cmd.Flags = append(cmd.Flags, completion.Flag{Name: f.Name, Arg: arg, Usage: usage})
		})
		out = append(out, cmd)
	}
	return out
}

// isBool reports whether f is a boolean flag, given without a value.
func isBool(f *flag.Flag) bool {
	b, ok := f.Value.(interface{ IsBoolFlag() bool })
	return ok && b.IsBoolFlag()
}
