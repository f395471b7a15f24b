package main

import (
	"fmt"
	"io"
	"runtime"
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

// versionLine is "troupe VERSION (revision REV[, DATE][, modified], GOVERSION)".
// The revision is the link-time commit of a release build, else the build
// info's vcs.revision; without either it says so.
func versionLine() string {
	settings := map[string]string{}
	goVersion := runtime.Version()
	if bi, ok := debug.ReadBuildInfo(); ok {
		for _, s := range bi.Settings {
			settings[s.Key] = s.Value
		}
		goVersion = bi.GoVersion
	}
	rev := settings["vcs.revision"]
	if commit != "" && commit != rev {
		// A release build made without VCS stamping (-buildvcs=false, or
		// from an export with no .git): the build info's time and
		// "modified" describe no commit, so only the stamped one is said.
		rev, settings = commit, nil
	}
	var parts []string
	if rev != "" {
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
	parts = append(parts, goVersion)
	return fmt.Sprintf("troupe %s (%s)", buildVersion(), strings.Join(parts, ", "))
}
