// Package logging builds troupe's slog logger: human-readable tint output
// (colour only on a terminal, never with NO_COLOR) or JSON lines. It writes
// where it is told, which in stdio mode is always stderr: stdout belongs to
// the protocol.
package logging

import (
	"fmt"
	"io"
	"log/slog"
	"os"
	"strings"
	"time"

	"github.com/lmittmann/tint"
)

// Options choose the log's level and format.
type Options struct {
	Level string // debug, info, warn, error
	// Var, when set, receives Level and is the handler's level, so the
	// level can change while troupe runs (config reload).
	Var    *slog.LevelVar
	Format string // text or json
	// NoColor forces plain text even on a terminal.
	NoColor bool
}

// ParseLevel reads a level name.
func ParseLevel(s string) (slog.Level, error) {
	var l slog.Level
	if err := l.UnmarshalText([]byte(strings.ToUpper(s))); err != nil {
		return 0, fmt.Errorf("log level %q: want debug, info, warn or error", s)
	}
	return l, nil
}

// New returns a handler writing to w at the given level.
func New(w io.Writer, o Options) (slog.Handler, error) {
	parsed, err := ParseLevel(o.Level)
	if err != nil {
		return nil, err
	}
	var level slog.Leveler = parsed
	if o.Var != nil {
		o.Var.Set(parsed)
		level = o.Var
	}
	switch o.Format {
	case "json":
		return slog.NewJSONHandler(w, &slog.HandlerOptions{Level: level}), nil
	case "text", "":
		return tint.NewTextHandler(w, &tint.Options{
			Level:      level,
			TimeFormat: time.StampMilli,
			NoColor:    o.NoColor || !isTerminal(w) || os.Getenv("NO_COLOR") != "",
		}), nil
	}
	return nil, fmt.Errorf("log format %q: want text or json", o.Format)
}

// isTerminal reports whether w is a character device (a TTY); tint has no
// detection of its own.
func isTerminal(w io.Writer) bool {
	f, ok := w.(*os.File)
	if !ok {
		return false
	}
	fi, err := f.Stat()
	return err == nil && fi.Mode()&os.ModeCharDevice != 0
}
