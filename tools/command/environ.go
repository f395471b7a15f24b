package command

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"troupe/tools"
	"troupe/workspace"
)

// defaultPath is the baseline PATH when the server runs without one.
const defaultPath = "/usr/local/bin:/usr/bin:/bin"

// baseEnv is the environment every command starts from: a few variables of
// the server's, never all of them, so what the server was started with
// (tokens, proxies, config paths) does not reach configured programs by
// accident.
func baseEnv() map[string]string {
	env := map[string]string{
		"PATH":   os.Getenv("PATH"),
		"TMPDIR": os.TempDir(),
		"TERM":   "dumb",
	}
	if env["PATH"] == "" {
		env["PATH"] = defaultPath
	}
	for _, k := range []string{"HOME", "LANG", "LC_ALL"} {
		if v, ok := os.LookupEnv(k); ok {
			env[k] = v
		}
	}
	return env
}

// checkEnv rejects variables the kernel cannot pass: names with "=" or
// NUL, values with NUL.
func checkEnv(env map[string]string) error {
	for k, v := range env {
		if k == "" || strings.ContainsAny(k, "=\x00") {
			return fmt.Errorf("environment variable name %q is not valid", k)
		}
		if strings.IndexByte(v, 0) >= 0 {
			return fmt.Errorf("environment variable %s contains a NUL character", k)
		}
	}
	return nil
}

// mergeEnv layers the maps, later ones winning.
func mergeEnv(layers ...map[string]string) map[string]string {
	out := make(map[string]string)
	for _, l := range layers {
		for k, v := range l {
			out[k] = v
		}
	}
	return out
}

// environ renders env as exec.Cmd.Env wants it, sorted for determinism.
func environ(env map[string]string) []string {
	out := make([]string, 0, len(env))
	for k, v := range env {
		out = append(out, k+"="+v)
	}
	slices.Sort(out)
	return out
}

// errNoProgram is lookProgram's "not found on PATH".
var errNoProgram = errors.New("not found")

// lookProgram finds the program to run: command itself when it is an
// absolute path, else the first executable file of that name in the
// directories of pathEnv. Relative PATH entries are skipped: they would
// be relative to the server's own working directory, which means nothing
// to a tool.
func lookProgram(command, pathEnv string) (string, error) {
	if filepath.IsAbs(command) {
		return command, checkExecutable(command)
	}
	for _, dir := range filepath.SplitList(pathEnv) {
		if dir == "" || !filepath.IsAbs(dir) {
			continue
		}
		p := filepath.Join(dir, command)
		if checkExecutable(p) == nil {
			return p, nil
		}
	}
	return "", errNoProgram
}

// errNotRegular is checkExecutable's refusal of directories and devices.
var errNotRegular = errors.New("not a regular file")

func checkExecutable(p string) error {
	fi, err := os.Stat(p)
	if err != nil {
		return err
	}
	if !fi.Mode().IsRegular() {
		return errNotRegular
	}
	if fi.Mode().Perm()&0o111 == 0 {
		return fs.ErrPermission
	}
	return nil
}

// dirError maps Dirs.WorkDir's failure for a call to the error the model
// sees. It quotes the path as the session or the config wrote it, never
// the host path it resolved to.
func dirError(tool, p, from string, err error) error {
	kind, reason := workspace.DirProblem(err)
	return tools.Errorf(kind, "%s: working directory %q (%s) %s", tool, p, from, reason)
}
