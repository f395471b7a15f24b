package tools_test

import (
	"bytes"
	"log/slog"
	"strings"
	"testing"

	"troupe/tools"
)

// Each distinct warning is written once however often it is logged;
// different attributes are different warnings; below warn nothing is
// held back.
func TestWarnOnceWritesEachWarningOnce(t *testing.T) {
	var buf bytes.Buffer
	log := tools.WarnOnce(slog.New(slog.NewTextHandler(&buf, &slog.HandlerOptions{Level: slog.LevelDebug})))
	for range 3 {
		log.Warn("tool name: Codex will show it under another name", "tool", "everything.echo")
		log.Warn("tool name: Codex will show it under another name", "tool", "everything.get-sum")
		log.With("server", "everything").Warn("downstream tool left out", "tool", "x")
		log.Info("rebuilt")
	}
	out := buf.String()
	for want, n := range map[string]int{"tool=everything.echo": 1, "tool=everything.get-sum": 1, "server=everything": 1, "rebuilt": 3} {
		if got := strings.Count(out, want); got != n {
			t.Errorf("%s written %d times, want %d:\n%s", want, got, n, out)
		}
	}
}
