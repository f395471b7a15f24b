package main

import (
	"errors"
	"flag"
	"fmt"
	"os"

	"troupe/audit"
)

const auditUsage = `usage: troupe audit verify [FILE]

Checks the audit log's hash chain: every record's hash, and that each
record follows the one before it. FILE defaults to the audit log's default
place ($XDG_STATE_HOME/troupe/audit.jsonl, else
~/.local/state/troupe/audit.jsonl). Exits 0 when the chain is intact, 1
when it is not (naming the first bad line) or FILE cannot be read, 2 on
usage errors.
`

// auditCommand is "troupe audit verify [FILE]". It is not serve, so it
// may print its verdict on stdout.
func auditCommand(args []string, stdout, stderr *os.File) int {
	if len(args) == 0 || args[0] != "verify" {
		fmt.Fprint(stderr, auditUsage)
		return 2
	}
	fs := flag.NewFlagSet("audit verify", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.Usage = func() { fmt.Fprint(stderr, auditUsage) }
	if err := fs.Parse(args[1:]); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return 0
		}
		return 2
	}
	var path string
	switch fs.NArg() {
	case 0:
		p, err := audit.DefaultPath()
		if err != nil {
			fmt.Fprintln(stderr, "troupe:", err)
			return 1
		}
		path = p
	case 1:
		path = fs.Arg(0)
	default:
		fmt.Fprintf(stderr, "troupe: audit verify: unexpected argument %q\n\n%s", fs.Arg(1), auditUsage)
		return 2
	}
	f, err := os.Open(path)
	if err != nil {
		fmt.Fprintln(stderr, "troupe: audit verify:", err)
		return 1
	}
	defer f.Close()
	n, err := audit.Verify(f)
	var ve *audit.VerifyError
	switch {
	case errors.As(err, &ve):
		fmt.Fprintf(stderr, "%s: line %d: %s\n", path, ve.Line, ve.Reason)
		return 1
	case err != nil:
		fmt.Fprintf(stderr, "troupe: audit verify: %s: %v\n", path, err)
		return 1
	}
	fmt.Fprintf(stdout, "%s: %d records, chain intact\n", path, n)
	return 0
}
