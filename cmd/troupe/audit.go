package main

import (
	"errors"
	"fmt"
	"os"

	"troupe/audit"
)

// auditVerifyFlags declares the flags of "troupe audit verify": the
// command parses them, and "troupe completion" offers them.
func auditVerifyFlags() *commonFlags { return newCommonFlags(auditVerifyHelp(), false) }

// auditCommand is "troupe audit verify [FILE]": it checks the log troupe
// writes with this configuration (audit.path, from --config, -c or
// TROUPE_AUDIT__PATH) unless FILE names another. It is not serve, so it
// may print its verdict on stdout.
func auditCommand(args []string, stdout, stderr *os.File) int {
	help := auditVerifyHelp()
	c := auditVerifyFlags()
	switch {
	case len(args) > 0 && (args[0] == "-h" || args[0] == "--help" || args[0] == "-help"):
		printHelp(stdout, c.fs, help)
		return exitOK
	case len(args) == 0 || args[0] != "verify":
		printHelp(stderr, c.fs, help)
		return exitUsage
	}
	if code, ok := c.parse(args[1:], stdout, stderr); !ok {
		return code
	}
	var path string
	switch c.fs.NArg() {
	case 0:
		// The configured log: a mistake in the configuration must not
		// send the check to another file, so it is an error here too.
		cfg, code, ok := c.loadConfig(stderr)
		if !ok {
			return code
		}
		p, err := cfg.AuditFile()
		if err != nil {
			fmt.Fprintln(stderr, "troupe: audit verify:", err)
			return exitRuntime
		}
		path = p
		if !cfg.Audit.Enabled {
			fmt.Fprintf(stderr, "troupe: note: the audit log is off ([audit] enabled = false); checking %s anyway\n", path)
		}
	case 1:
		path = c.fs.Arg(0)
	default:
		return usageError(stderr, help, "unexpected argument %q", c.fs.Arg(1))
	}
	f, err := os.Open(path)
	if err != nil {
		fmt.Fprintln(stderr, "troupe: audit verify:", err)
		return exitRuntime
	}
	defer f.Close()
	n, err := audit.Verify(f)
	var ve *audit.VerifyError
	switch {
	case errors.As(err, &ve):
		fmt.Fprintf(stderr, "%s: line %d: %s\n", path, ve.Line, ve.Reason)
		return exitRuntime
	case err != nil:
		fmt.Fprintf(stderr, "troupe: audit verify: %s: %v\n", path, err)
		return exitRuntime
	}
	fmt.Fprintf(stdout, "%s: %d records, chain intact\n", path, n)
	return exitOK
}
