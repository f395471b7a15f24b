package command_test

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"troupe/tools"
)

// A tool whose ${NAME} was unset or empty fails each call as
// unauthenticated naming the variable, before its program runs (and
// before the gate: Preview fails the same).
func TestMissingVariableIsUnauthenticated(t *testing.T) {
	ws := t.TempDir()
	marker := filepath.Join(ws, "ran")
	def := shDef(": > " + marker)
	def.Env = map[string]string{"API_KEY": ""}
	def.MissingVars = []string{"DEPLOY_KEY"}
	tl := newTool(t, def, ws)

	_, err := call(testCtx(t, 30*time.Second), t, tl, map[string]any{}, nil)
	te := wantToolError(t, err, tools.KindUnauthenticated)
	if !strings.Contains(te.Message, "set the environment variable DEPLOY_KEY") {
		t.Errorf("the hint: %q", te.Message)
	}
	if p, ok := tools.Implements[tools.Previewer](tl); !ok {
		t.Fatal("a command tool has no Preview")
	} else if _, err := p.Preview(&tools.Request{}); err == nil {
		t.Error("Preview passes a call that cannot run")
	}
	if _, err := os.Stat(marker); err == nil {
		t.Error("the program ran without its credential")
	}
}
