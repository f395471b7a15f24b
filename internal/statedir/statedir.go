// Package statedir is where troupe keeps its state when the configuration
// names no place: the audit log, the pins, Codex's homes.
package statedir

import (
	"fmt"
	"os"
	"path/filepath"
)

// Dir is $XDG_STATE_HOME/troupe, else ~/.local/state/troupe. A relative
// XDG_STATE_HOME is ignored, as the XDG base directory specification asks.
func Dir() (string, error) {
	if d := os.Getenv("XDG_STATE_HOME"); d != "" && filepath.IsAbs(d) {
		return filepath.Join(d, "troupe"), nil
	}
	home, err := os.UserHomeDir()
	if err != nil {
		return "", fmt.Errorf("the state directory: %w", err)
	}
	return filepath.Join(home, ".local", "state", "troupe"), nil
}
