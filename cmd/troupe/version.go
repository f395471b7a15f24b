package main

import (
	"fmt"
	"io"
	"runtime/debug"
	"strings"
)

// versionCommand is "troupe version": the version, and the VCS revision
// and commit date the binary was built from, so a report can name the
// exact code.
func versionCommand(args []string, stdout, stderr io.Writer) int {
	help := versionHelp()
	fs := newFlagSet(help)
	if code, ok := parseFlags(fs, help, args, stdout, stderr); !ok {
		return code
	}
	if fs.NArg() > 0 {
		return usageError(stderr, help, "unexpected argument %q", fs.Arg(0))
	}
	fmt.Fprintln(stdout, versionLine())
	return exitOK
}

// versionLine is "troupe VERSION (revision REV, DATE[, modified], GOVERSION)",
// from the build info; without VCS information it says so.
func versionLine() string {
	bi, ok := debug.ReadBuildInfo()
	if !ok {
		return "troupe " + buildVersion() + " (no build information)"
	}
	settings := map[string]string{}
	for _, s := range bi.Settings {
		settings[s.Key] = s.Value
	}
	var parts []string
	if rev := settings["vcs.revision"]; rev != "" {
		parts = append(parts, "revision "+rev)
		if t := settings["vcs.time"]; t != "" {
			parts = append(parts, t)
		}
		if settings["vcs.modified"] == "true" {
			parts = append(parts, "modified")
		}
	} else {
		parts = append(parts, "no VCS revision: built outside a checkout or with -buildvcs=false")
	}
	parts = append(parts, bi.GoVersion)
	return fmt.Sprintf("troupe %s (%s)", buildVersion(), strings.Join(parts, ", "))
}
