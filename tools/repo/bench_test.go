package repo_test

import (
	"context"
	"fmt"
	"os/exec"
	"testing"

	"troupe/sandbox"
	"troupe/tools/repo"
)

// BenchmarkRipgrepCall measures one repo.ripgrep call on a small tree: rg
// confined by the sandbox (the helper is this test binary, or the
// standalone troupe-sandbox, as a server ships it), rg started directly as
// before issue 13 (the baseline), and the built-in search.
//
//	go test -run '^$' -bench RipgrepCall -benchtime 200x ./tools/repo/
func BenchmarkRipgrepCall(b *testing.B) {
	rg, err := exec.LookPath("rg")
	if err != nil {
		b.Skip("rg is not installed")
	}
	fx := fixture{}
	for i := range 50 {
		fx[fmt.Sprintf("d%d/f%02d.go", i%5, i)] = "package x\n// a needle here\nfunc f() {}\n"
	}
	ws, dir := fx.build(b)
	args := map[string]any{"query": "needle", "maxMatches": 100}

	b.Run("unconfined-rg", func(b *testing.B) {
		// What ripgrep_rg.go did before: rg started directly.
		for b.Loop() {
			cmd := exec.Command(rg, "--json", "--no-config", "--sort", "path", "--no-require-git", "--no-ignore-global",
				"--no-ignore-parent", "--no-ignore-exclude", "--regexp", "needle", "--", ".")
			cmd.Dir, cmd.Env = dir, []string{}
			if _, err := cmd.Output(); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("confined-rg-test-binary-helper", func(b *testing.B) {
		sb, err := sandbox.New(sandbox.Options{})
		if err != nil {
			b.Fatal(err)
		}
		benchCalls(b, newToolSet(b, ws, repo.Options{Sandbox: sb}), args)
	})
	b.Run("confined-rg-troupe-sandbox", func(b *testing.B) {
		if sandboxHelper(b) == "" {
			b.Skip("troupe-sandbox cannot be built")
		}
		benchCalls(b, newToolSet(b, ws, repo.Options{}), args)
	})
	b.Run("builtin", func(b *testing.B) {
		benchCalls(b, newToolSet(b, ws, repo.Options{DisableRipgrep: true}), args)
	})
}

func benchCalls(b *testing.B, ts *toolSet, args map[string]any) {
	ctx := context.Background()
	var r grepResult
	if err := ts.call(ctx, repo.NameRipgrep, args, &r); err != nil || len(r.Matches) != 50 {
		b.Fatalf("%v, %d matches", err, len(r.Matches))
	}
	b.ResetTimer()
	for b.Loop() {
		if err := ts.call(ctx, repo.NameRipgrep, args, nil); err != nil {
			b.Fatal(err)
		}
	}
}
