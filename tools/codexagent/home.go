package codexagent

import (
	"bytes"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"

	"github.com/pelletier/go-toml/v2"
)

// Codex's homes: where each Codex troupe starts keeps its state.
//
// Codex keeps everything in CODEX_HOME: its credentials (auth.json), its
// configuration (config.toml, which setDefaultModel rewrites) and every
// conversation's rollout file. One CODEX_HOME shared by every session would
// hand one session's API key, logout and conversations to every other, so
// troupe never runs Codex in the operator's CODEX_HOME. It keeps homes of
// its own under Options.StateDir (mode 0700):
//
//	StateDir/
//	  tools/              the codex and codex-reply tools' home
//	  sessions/<random>/  one per session that uses the management methods
//	  shared/sessions/    the rollouts every session shares when
//	                      MethodOptions.ShareConversations is set (each
//	                      session home's sessions/ leads there)
//
// A home is made from the operator's: its config.toml, without any
// project trust (see homeConfig), and a copy of its auth.json, so every
// Codex can use the operator's credentials while a key a session sets, a
// logout or a new default model touch that session's copy only. When the
// session ends its credentials go; its rollouts stay, for a later session
// to resume. Every Codex runs in troupe's sandbox with its own home as
// one of the only places it may write; the operator's CODEX_HOME and
// StateDir are hidden from every other sandboxed run (app.go adds them to
// the sandbox's hidden paths).

// homeKind says which home a Codex gets.
type homeKind int

const (
	homeTools   homeKind = iota // the tools' home
	homeSession                 // a session's own home
)

// homes makes and finds the homes under one StateDir.
type homes struct {
	root      string // StateDir, absolute
	operator  string // the operator's CODEX_HOME ("" when unknown)
	workspace string // troupe's workspace (symlinks resolved)
	share     bool   // the sessions' rollouts are shared
}

// authFile is where Codex keeps its credentials in a home.
const authFile = "auth.json"

// ensure makes dir (and its parents) with mode 0700.
func ensure(dir string) error {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return fmt.Errorf("codex home: %w", err)
	}
	return nil
}

// tools returns the tools' home, making it (and refreshing its config and
// credentials from the operator's) when it does not exist yet.
func (h *homes) tools() (string, error) {
	dir := filepath.Join(h.root, "tools")
	if err := h.fill(dir); err != nil {
		return "", err
	}
	return dir, nil
}

// newSession makes a fresh home for a session.
func (h *homes) newSession() (string, error) {
	var b [12]byte
	if _, err := rand.Read(b[:]); err != nil {
		return "", err
	}
	dir := filepath.Join(h.root, "sessions", hex.EncodeToString(b[:]))
	if err := h.fill(dir); err != nil {
		return "", err
	}
	if h.share {
		shared := h.sharedRollouts()
		if err := ensure(shared); err != nil {
			return "", err
		}
		if err := os.Symlink(shared, filepath.Join(dir, "sessions")); err != nil && !errors.Is(err, os.ErrExist) {
			return "", fmt.Errorf("codex home: %w", err)
		}
	}
	return dir, nil
}

// sharedRollouts is the directory of the shared rollouts.
func (h *homes) sharedRollouts() string { return filepath.Join(h.root, "shared", "sessions") }

// writable are the directories a Codex with home dir may write.
func (h *homes) writable(dir string) []string {
	if h.share && strings.HasPrefix(dir, filepath.Join(h.root, "sessions")+string(filepath.Separator)) {
		return []string{dir, filepath.Dir(h.sharedRollouts())}
	}
	return []string{dir}
}

// fill makes dir a home: the operator's configuration as homeConfig
// writes it, and a copy of the operator's credentials. The tools' home is
// filled again before every call: a file is rewritten only when it would
// change, and the credentials only when the operator's are newer than the
// home's copy (a new login), so a token Codex refreshed in the home is not
// put back to the operator's older one.
func (h *homes) fill(dir string) error {
	if err := ensure(dir); err != nil {
		return err
	}
	cfg, err := h.homeConfig()
	if err != nil {
		return err
	}
	cfgPath := filepath.Join(dir, "config.toml")
	if old, err := os.ReadFile(cfgPath); err != nil || !bytes.Equal(old, cfg) {
		if err := writeFile(cfgPath, cfg); err != nil {
			return err
		}
	}
	if h.operator == "" {
		return nil
	}
	from := filepath.Join(h.operator, authFile)
	fi, err := os.Stat(from)
	switch {
	case errors.Is(err, os.ErrNotExist):
		return nil
	case err != nil:
		return fmt.Errorf("codex home: the operator's credentials: %w", err)
	}
	to := filepath.Join(dir, authFile)
	if copied, err := os.Stat(to); err == nil && !fi.ModTime().After(copied.ModTime()) {
		return nil
	}
	auth, err := os.ReadFile(from)
	if err != nil {
		return fmt.Errorf("codex home: the operator's credentials: %w", err)
	}
	return writeFile(to, auth)
}

// homeConfig is the config.toml of troupe's homes: the operator's
// (CODEX_HOME/config.toml), with the projects table replaced by one
// entry that marks troupe's workspace untrusted. Codex reads a project's
// own .codex/config.toml (which may name MCP servers, hooks, a notify
// program: programs Codex starts) only for trusted projects, and
// whatever runs in the workspace can write that file: the workspace's
// configuration is input from the workspace, never the operator's word.
func (h *homes) homeConfig() ([]byte, error) {
	tree := map[string]any{}
	if h.operator != "" {
		b, err := os.ReadFile(filepath.Join(h.operator, "config.toml"))
		switch {
		case errors.Is(err, os.ErrNotExist):
		case err != nil:
			return nil, fmt.Errorf("codex home: the operator's config.toml: %w", err)
		default:
			if err := toml.Unmarshal(b, &tree); err != nil {
				return nil, fmt.Errorf("codex home: the operator's config.toml: %w", err)
			}
		}
	}
	tree["projects"] = map[string]any{h.workspace: map[string]any{"trust_level": "untrusted"}}
	return toml.Marshal(tree)
}

// forget removes what a session's home holds that must not outlive the
// session: its credentials (the operator's copy, or a key the session
// set). A home with no rollouts goes altogether.
func (h *homes) forget(dir string) {
	_ = os.Remove(filepath.Join(dir, authFile))
	if !h.share {
		if holdsFiles(filepath.Join(dir, "sessions")) || holdsFiles(filepath.Join(dir, "archived_sessions")) {
			return
		}
	}
	_ = os.RemoveAll(dir)
}

// holdsFiles reports whether a regular file lies below dir (false when
// dir does not exist); the walk stops at the first. An unreadable dir
// counts as holding files, so nothing is removed on a guess.
func holdsFiles(dir string) bool {
	found := false
	err := filepath.WalkDir(dir, func(_ string, d os.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.Type().IsRegular() {
			found = true
			return io.EOF
		}
		return nil
	})
	return found || err != nil && !errors.Is(err, io.EOF) && !errors.Is(err, os.ErrNotExist)
}

// writeFile writes b to path (mode 0600) through a temporary file and a
// rename, so Codex never reads half a file.
func writeFile(path string, b []byte) error {
	f, err := os.CreateTemp(filepath.Dir(path), ".troupe-*")
	if err != nil {
		return fmt.Errorf("codex home: %w", err)
	}
	_, err = f.Write(b)
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Rename(f.Name(), path)
	}
	if err != nil {
		_ = os.Remove(f.Name())
		return fmt.Errorf("codex home: %w", err)
	}
	return nil
}

// rolloutHome returns the home a rollout file (absolute, symlinks
// resolved) lies in, and whether it lies in one of troupe's homes'
// sessions/ directories at all: the tools' home, a session's, or the
// shared rollouts.
func (h *homes) rolloutHome(real string) (string, bool) {
	rel, err := filepath.Rel(h.root, real)
	if err != nil || rel == ".." || strings.HasPrefix(rel, "../") {
		return "", false
	}
	parts := strings.Split(rel, string(filepath.Separator))
	switch {
	case len(parts) > 2 && parts[0] == "tools" && parts[1] == "sessions":
		return filepath.Join(h.root, "tools"), true
	case len(parts) > 3 && parts[0] == "sessions" && parts[2] == "sessions":
		return filepath.Join(h.root, "sessions", parts[1]), true
	case len(parts) > 2 && parts[0] == "shared" && parts[1] == "sessions":
		return filepath.Join(h.root, "shared"), true
	}
	return "", false
}

// findRollout looks for conversation id's rollout file in every home's
// sessions/ directory (Codex names them rollout-<time>-<id>.jsonl under
// sessions/YYYY/MM/DD); "" when there is none.
func (h *homes) findRollout(id string) string {
	for _, pattern := range []string{
		filepath.Join(h.root, "sessions", "*", "sessions", "*", "*", "*", "rollout-*-"+id+".jsonl"),
		filepath.Join(h.root, "shared", "sessions", "*", "*", "*", "rollout-*-"+id+".jsonl"),
		filepath.Join(h.root, "tools", "sessions", "*", "*", "*", "rollout-*-"+id+".jsonl"),
	} {
		if m, _ := filepath.Glob(pattern); len(m) > 0 {
			return m[0]
		}
	}
	return ""
}

// adopt moves a rollout file (absolute, in a home under root) into home's
// sessions/ directory at the same date path, so that home's Codex finds
// the conversation; it returns the new path. A rollout already in home
// (or, sharing, in the shared rollouts) stays where it is.
func (h *homes) adopt(home, rollout string) (string, error) {
	from, ok := h.rolloutHome(rollout)
	if !ok {
		return "", fmt.Errorf("%s is not in one of troupe's Codex homes", rollout)
	}
	if from == home || (h.share && from == filepath.Join(h.root, "shared")) {
		return rollout, nil
	}
	rel, err := filepath.Rel(filepath.Join(from, "sessions"), rollout)
	if err != nil {
		return "", err
	}
	to := filepath.Join(home, "sessions", rel)
	if err := os.MkdirAll(filepath.Dir(to), 0o700); err != nil {
		return "", err
	}
	if err := os.Rename(rollout, to); err != nil {
		return "", err
	}
	return to, nil
}
