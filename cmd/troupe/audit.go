package main

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"troupe/audit"
)

// auditVerifyFlags declares the flags of "troupe audit verify": the
// command parses them, and "troupe completion" offers them.
func auditVerifyFlags() *commonFlags { return newCommonFlags(auditVerifyHelp(), false) }

// auditCommand is "troupe audit verify [FILE]": it checks the log troupe
// writes with this configuration (audit.path, from --config, -c or
// TROUPE_AUDIT__PATH) unless FILE names another, with its rotated files
// (FILE.n … FILE.1, then FILE: one chain). It is not serve, so it may
// print its verdict on stdout.
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
	rep, err := audit.VerifyLog(path)
	var ve *audit.VerifyError
	switch {
	case errors.As(err, &ve):
		fmt.Fprintln(stderr, ve.Error())
		if len(rep.Files) > 1 {
			fmt.Fprintf(stderr, "troupe: audit verify: %d records before it intact, in %s\n", rep.Records, fileList(rep.Files))
		}
		return exitRuntime
	case err != nil:
		fmt.Fprintln(stderr, "troupe: audit verify:", err)
		return exitRuntime
	}
	if rep.Start != "" {
		fmt.Fprintf(stderr, "troupe: note: %s begins with a record that links to %s, which is in none of the files checked: "+
			"the files before it were deleted (audit.max_files keeps the newest; or by hand), or records were deleted from its start. "+
			"The chain is checked from there; compare that hash with a copy kept elsewhere if the older records matter.\n",
			rep.Files[0], rep.Start)
	}
	if len(rep.Files) == 1 {
		fmt.Fprintf(stdout, "%s: %d records, chain intact\n", rep.Files[0], rep.Records)
		return exitOK
	}
	fmt.Fprintf(stdout, "%s: %d records in %s, chain intact\n", path, rep.Records, fileList(rep.Files))
	return exitOK
}

// fileList names a rotated log's files, oldest first, by their base names
// (they share one directory).
func fileList(files []string) string {
	names := make([]string, len(files))
	for i, f := range files {
		names[i] = filepath.Base(f)
	}
	return fmt.Sprintf("%d files (oldest first: %s)", len(files), strings.Join(names, ", "))
}
