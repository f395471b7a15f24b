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

// workspaceDir resolves the workspace to an absolute directory path with
// symlinks resolved; every working directory is checked against it.
func workspaceDir(workspace string) (abs, real string, err error) {
	if workspace == "" {
		return "", "", errors.New("no workspace directory given")
	}
	abs, err = filepath.Abs(workspace)
	if err != nil {
		return "", "", err
	}
	real, err = filepath.EvalSymlinks(abs)
	if err != nil {
		return "", "", err
	}
	fi, err := os.Stat(real)
	if err != nil {
		return "", "", err
	}
	if !fi.IsDir() {
		return "", "", fmt.Errorf("%s is not a directory", workspace)
	}
	return abs, real, nil
}

// within reports whether target is base or lies under it (both clean and
// absolute).
func within(base, target string) bool {
	rel, err := filepath.Rel(base, target)
	return err == nil && rel != ".." && !strings.HasPrefix(rel, ".."+string(filepath.Separator)) && !filepath.IsAbs(rel)
}

// Reasons resolveDir refuses a directory.
var (
	errOutside = errors.New("outside the workspace")
	errNotDir  = errors.New("not a directory")
)

// resolveDir turns a configured or session working directory into a host
// path inside the workspace (wsAbs as configured, wsReal with symlinks
// resolved). Relative paths start at the workspace; absolute ones must
// lie in it. The path is checked twice: as written (so "../x" is refused
// even when it does not exist) and with every symlink resolved (so a link
// that leads out is refused too).
func resolveDir(wsAbs, wsReal, p string) (string, error) {
	if strings.IndexByte(p, 0) >= 0 {
		return "", errors.New("contains a NUL character")
	}
	var abs string
	if filepath.IsAbs(p) {
		abs = filepath.Clean(p)
		if !within(wsAbs, abs) && !within(wsReal, abs) {
			return "", errOutside
		}
	} else {
		abs = filepath.Join(wsReal, p)
		if !within(wsReal, abs) {
			return "", errOutside
		}
	}
	real, err := filepath.EvalSymlinks(abs)
	if err != nil {
		return "", err
	}
	if !within(wsReal, real) {
		return "", errOutside
	}
	fi, err := os.Stat(real)
	if err != nil {
		return "", err
	}
	if !fi.IsDir() {
		return "", errNotDir
	}
	return real, nil
}

// dirError maps resolveDir's failure for a call to the error the model
// sees. It quotes the path as the session or the config wrote it, never
// the host path it resolved to.
func dirError(tool, p, from string, err error) error {
	switch {
	case errors.Is(err, errOutside):
		return tools.Errorf(tools.KindPermissionDenied,
			"%s: working directory %q (%s) is outside the workspace; it must lie inside it", tool, p, from)
	case errors.Is(err, fs.ErrNotExist), errors.Is(err, errNotDir):
		return tools.Errorf(tools.KindNotFound,
			"%s: working directory %q (%s) is not a directory in the workspace", tool, p, from)
	case errors.Is(err, fs.ErrPermission):
		return tools.Errorf(tools.KindPermissionDenied,
			"%s: working directory %q (%s) cannot be entered: permission denied", tool, p, from)
	}
	return tools.Errorf(tools.KindInvalidArgument, "%s: working directory %q (%s) cannot be used", tool, p, from)
}

// relDir is dir relative to the workspace, slash-separated ("." for the
// root), for prompts and audit records: never a host path.
func relDir(wsReal, dir string) string {
	rel, err := filepath.Rel(wsReal, dir)
	if err != nil || rel == ".." || strings.HasPrefix(rel, "../") {
		return "."
	}
	return filepath.ToSlash(rel)
}
