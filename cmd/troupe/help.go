package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"strings"
)

// Exit codes, the same for every subcommand (README, "Run").
const (
	exitOK      = 0 // done; for audit verify: the chain is intact
	exitRuntime = 1 // something failed while running (I/O, a broken audit chain, a failed bench run)
	exitUsage   = 2 // the command line or the configuration is wrong: nothing was started
)

// command describes one subcommand for its help: what it is for and how
// it is used, so that "troupe CMD --help" needs no README.
type cmdHelp struct {
	name    string // as typed: "config check"
	args    string // after the flags: "[FILE]"
	usage   string // the whole usage line, when it is not "troupe NAME [flags] ARGS"
	summary string // one line, for "troupe help"
	desc    string // paragraphs
	example string // lines
}

// newFlagSet is a flag set whose own messages are silenced: parseFlags
// reports errors and help in troupe's words, flags spelled --flag.
func newFlagSet(c cmdHelp) *flag.FlagSet {
	fs := flag.NewFlagSet(c.name, flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	fs.Usage = func() {}
	return fs
}

// parseFlags parses args. It returns false with the exit code when the
// command should end here: 0 after printing the help on stdout (-h,
// --help), 2 after a usage error on stderr.
func parseFlags(fs *flag.FlagSet, c cmdHelp, args []string, stdout, stderr io.Writer) (int, bool) {
	err := fs.Parse(args)
	switch {
	case errors.Is(err, flag.ErrHelp):
		printHelp(stdout, fs, c)
		return exitOK, false
	case err != nil:
		fmt.Fprintf(stderr, "troupe %s: %s\nRun \"troupe %s --help\" for its flags.\n", c.name, dashes(err.Error()), c.name)
		return exitUsage, false
	}
	return 0, true
}

// usageError reports a wrong command line and returns exitUsage.
func usageError(stderr io.Writer, c cmdHelp, format string, a ...any) int {
	fmt.Fprintf(stderr, "troupe %s: %s\nRun \"troupe %s --help\" for its flags.\n", c.name, fmt.Sprintf(format, a...), c.name)
	return exitUsage
}

// dashes rewrites the flag package's "-name" in its messages to the
// spelling the README and the help use.
func dashes(msg string) string {
	// The flag package names flags as " -name" or "-name:"; the help spells
	// long ones "--name".
	var b strings.Builder
	for i := 0; i < len(msg); i++ {
		if msg[i] == '-' && (i == 0 || msg[i-1] == ' ' || msg[i-1] == '"') && i+2 < len(msg) && isLetter(msg[i+1]) && isFlagChar(msg[i+2]) {
			b.WriteString("--")
			continue
		}
		b.WriteByte(msg[i])
	}
	return b.String()
}

func isLetter(c byte) bool { return c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' }

func isFlagChar(c byte) bool {
	return c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '-' || c == '_'
}

// printHelp writes c's help: usage line, description, flags and example.
func printHelp(w io.Writer, fs *flag.FlagSet, c cmdHelp) {
	hasFlags := false
	fs.VisitAll(func(*flag.Flag) { hasFlags = true })
	switch {
	case c.usage != "":
		fmt.Fprintf(w, "usage: %s", c.usage)
	default:
		fmt.Fprintf(w, "usage: troupe %s", c.name)
		if hasFlags {
			fmt.Fprint(w, " [flags]")
		}
		if c.args != "" {
			fmt.Fprint(w, " ", c.args)
		}
	}
	fmt.Fprintf(w, "\n\n%s\n", strings.TrimSpace(c.desc))
	if hasFlags {
		fmt.Fprintln(w, "\nFlags:")
		printFlags(w, fs)
	}
	if c.example != "" {
		fmt.Fprintln(w, "\nExample:")
		for _, line := range strings.Split(strings.TrimSpace(c.example), "\n") {
			fmt.Fprintf(w, "  %s\n", line)
		}
	}
}

// printFlags lists fs's flags as the README spells them: "--name VALUE",
// one-letter flags "-c VALUE".
func printFlags(w io.Writer, fs *flag.FlagSet) {
	fs.VisitAll(func(f *flag.Flag) {
		dash := "--"
		if len(f.Name) == 1 {
			dash = "-"
		}
		arg, usage := flag.UnquoteUsage(f)
		if arg == "value" && len(f.Name) == 1 {
			arg = "key=value"
		}
		line := "  " + dash + f.Name
		if arg != "" {
			line += " " + arg
		}
		if def := f.DefValue; def != "" && def != "0" && def != "false" && def != "0s" {
			usage += fmt.Sprintf(" (default %s)", def)
		}
		fmt.Fprintf(w, "%s\n      %s\n", line, usage)
	})
}

// The subcommands' help texts.

func serveCommandHelp() cmdHelp {
	return cmdHelp{name: "serve", summary: "serve MCP over stdin/stdout (or HTTP with --http)",
		desc: `Serves troupe's tools to an MCP client. Without --http, MCP messages are read
from stdin and written to stdout (an MCP client such as Codex starts troupe
this way; typed at a terminal, troupe just waits for such messages). Logs
go to stderr. With --http, troupe serves streamable HTTP at
http://HOST:PORT/mcp instead (and stdio too with --stdio).

The configuration comes from the embedded defaults, then --config (else
$TROUPE_CONFIG, else ~/.config/troupe/config.toml when it exists), then
TROUPE_* environment variables, then -c flags. Exits 2 when the command line
or the configuration is wrong, 1 when serving fails.`,
		example: `troupe serve --workspace ~/src/app
troupe serve --workspace ~/src/app --http 127.0.0.1:8080 --bearer-token-env TROUPE_TOKEN`}
}

func configCheckHelp() cmdHelp {
	return cmdHelp{name: "config check", summary: "check the configuration as serve would and print it, secrets masked",
		desc: `Loads the configuration as serve does and runs every check serve runs
before serving: the config itself, where troupe's own files lie, the tool
registry (names, command tools, duplicates) and the [mcp_servers]
definitions (commands found, sandbox profiles, token variables set). Prints
the effective configuration with secrets masked, or each problem on stderr.
Exits 0 when serve would start, 2 when it would refuse.`,
		example: `troupe config check --config ~/.config/troupe/config.toml --workspace ~/src/app`}
}

func toolsHelp() cmdHelp {
	return cmdHelp{name: "tools", summary: "list the tools a session sees, with the names Codex shows",
		desc: `Lists the tools a session would see with this configuration, connecting
once to each [mcp_servers] entry, with their metadata and the name the
Codex model sees (Codex replaces characters outside A-Za-z0-9_ and gives
colliding or over-long names a hash suffix).

A downstream tool or prompt that changed since troupe first trusted it is
held (its server's on_change): it is shown under its server with what
changed, every invisible character made visible. --accept SERVER.TOOL
trusts the held version (the one troupe saw and shows; the audit log
records the local user as who accepted), --accept SERVER every held one
of the server; a running troupe picks it up from the pins file. Listing
never changes the pins.`,
		example: `troupe tools --workspace ~/src/app
troupe tools --json | jq '.tools[].name'
troupe tools --accept github.create_issue`}
}

func codexConfigHelp() cmdHelp {
	return cmdHelp{name: "codex-config", summary: "print the [mcp_servers.troupe] block for ~/.codex/config.toml",
		desc: `Prints the [mcp_servers.<server.name>] block that makes Codex use this
troupe: over stdio (Codex starts this binary with serve --workspace), or
over HTTP with --http URL (with --bearer-token-env NAME, the variable Codex
reads the bearer token from).`,
		example: `troupe codex-config --workspace ~/src/app >> ~/.codex/config.toml
troupe codex-config --http http://127.0.0.1:8080/mcp --bearer-token-env TROUPE_TOKEN`}
}

func auditVerifyHelp() cmdHelp {
	return cmdHelp{name: "audit verify", args: "[FILE]", summary: "check the audit log's hash chain",
		desc: `Checks the audit log's hash chain: every record's hash, and that each
record follows the one before it. Without FILE it checks the log troupe
writes with this configuration: audit.path (also TROUPE_AUDIT__PATH, -c,
--config), else $XDG_STATE_HOME/troupe/audit.jsonl, else
~/.local/state/troupe/audit.jsonl. A rotated log (audit.max_bytes) is
checked as one chain across its files, oldest first: FILE.N … FILE.1, FILE.
When audit.max_files has deleted the oldest files, the chain is checked
from the oldest kept file's first link, and a note says so. Exits 0 when
the chain is intact, 1 when it is not (naming the file and the first bad
line) or the file cannot be read, 2 on usage or configuration errors.`,
		example: `troupe audit verify
troupe audit verify --config ~/.config/troupe/config.toml
troupe audit verify /var/log/troupe/audit.jsonl`}
}

func versionHelp() cmdHelp {
	return cmdHelp{name: "version", summary: "print the version, VCS revision and build date",
		desc: `Prints troupe's version and, when it was built from a checkout, the VCS
revision and commit date (and "modified" when the tree had changes).`,
		example: `troupe version`}
}
