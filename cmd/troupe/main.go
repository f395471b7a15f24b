// Command troupe is an MCP tool server: it serves tools to Codex and other
// MCP clients over stdio, from an actor runtime with supervisor trees.
//
//	troupe serve [--workspace DIR] [--http HOST:PORT [--stdio]] [--log-level LEVEL] [--log-format text|json] [-c key=value]...
//	troupe version
//
// Without --http, troupe serves MCP on stdin/stdout; with it, over
// streamable HTTP (and on stdio too when --stdio is given). On stdio,
// stdout carries protocol messages only: everything else, logs included,
// goes to stderr.
//
// This command parses flags, prints help, sets up the log and stdout, and
// hands over to package troupe/app, which sets up and runs the server.
package main

import (
	"fmt"
	"io"
	"os"
	"runtime/debug"
	"slices"
	"strings"

	cmap "github.com/orcaman/concurrent-map"

	"troupe/sandbox"
)

// version and commit are set at link time by a release build
// (scripts/release: -ldflags "-X main.version=v1.2.3 -X main.commit=SHA").
// Without them the module version and the VCS revision from the build info
// are used: a plain "go build" in a checkout still names its commit.
var (
	version = ""
	commit  = ""
)

func main() {
	// troupe re-executed as its own sandbox helper: set up the isolation,
	// then become the program (see package sandbox).
	sandbox.RunHelperIfAsked()
	// protoactor's process registry is 1,024 buckets, each a
	// concurrent-map of SHARD_COUNT locked maps: 32,768 maps by default,
	// 8.5 MB and 8-16 ms of every start (most of start to initialize). The
	// buckets already spread the locks, so one shard each loses nothing.
	// It is the library's own setting and must be made before any map
	// exists: here, first thing, and nowhere else.
	cmap.SHARD_COUNT = 1
	os.Exit(run(os.Args[1:], os.Stdin, os.Stdout, os.Stderr))
}

const usage = `troupe: an MCP tool server

Usage:
  troupe serve [flags]          serve MCP over stdin/stdout (or HTTP with --http)
  troupe config check [flags]   run serve's checks on the configuration; print it, secrets masked
  troupe tools [flags]          list the tools a session sees, with the names Codex shows
  troupe codex-config [flags]   print the [mcp_servers.troupe] block for ~/.codex/config.toml
  troupe audit verify [FILE]    check the audit log's hash chain (default: the configured log)
  troupe bench [MODE] ...       load-test any MCP server (stdio or HTTP)
  troupe version                print the version, VCS revision and build date
  troupe completion SHELL       print a completion script for bash, zsh or fish
  troupe help [COMMAND]         show this help, or a command's

Run "troupe COMMAND --help" for a command's flags and an example.
Exit status: 0 done, 1 a runtime failure, 2 a usage or configuration error.
`

func run(args []string, stdin io.Reader, stdout, stderr *os.File) int {
	if len(args) == 0 {
		fmt.Fprint(stderr, usage)
		return 2
	}
	switch args[0] {
	case "serve":
		return serve(args[1:], stdin, stdout, stderr)
	case "config":
		return configCommand(args[1:], stdout, stderr)
	case "tools":
		return toolsCommand(args[1:], stdout, stderr)
	case "codex-config":
		return codexConfigCommand(args[1:], stdout, stderr)
	case "audit":
		return auditCommand(args[1:], stdout, stderr)
	case "bench":
		return benchCommand(args[1:], stdout, stderr)
	case "version", "--version", "-version":
		return versionCommand(args[1:], stdout, stderr)
	case "completion":
		return completionCommand(args[1:], stdout, stderr)
	case "help", "--help", "-h", "-help":
		if len(args) > 1 && args[0] == "help" {
			// "troupe help serve" is "troupe serve --help".
			sub := append(slices.Clone(args[1:]), "--help")
			if args[1] == "help" {
				fmt.Fprint(stdout, usage)
				return 0
			}
			return run(sub, stdin, stdout, stderr)
		}
		fmt.Fprint(stdout, usage)
		return 0
	}
	fmt.Fprintf(stderr, "troupe: unknown command %q\n\n%s", args[0], usage)
	return 2
}

// buildVersion is the version troupe reports (serverInfo, tools' _meta,
// "troupe version"): the link-time version, else the module's.
func buildVersion() string {
	if version != "" {
		return version
	}
	if bi, ok := debug.ReadBuildInfo(); ok && bi.Main.Version != "" {
		return bi.Main.Version
	}
	return "(devel)"
}

// multiFlag collects a repeatable flag.
type multiFlag []string

func (m *multiFlag) String() string     { return strings.Join(*m, ",") }
func (m *multiFlag) Set(s string) error { *m = append(*m, s); return nil }
