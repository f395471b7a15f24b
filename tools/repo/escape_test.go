package repo_test

import (
	"fmt"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"troupe/tools/repo"
	"troupe/workspace"
)

// raceCalls is how many searches race the swap; on the unconfined rg a few
// percent of calls returned outside lines, so this many find the escape
// many times over.
const raceCalls = 200

// TestRipgrepSwappedSymlinkRace is the attack from issue 13: while
// repo.ripgrep searches, a directory of the workspace keeps being swapped
// (atomically, with renameat2's RENAME_EXCHANGE) with a symlink to a
// directory outside it. A search that saw a directory and then opened its
// files through what had become the symlink returned outside lines. No
// call may return a line from outside, whichever engine runs.
func TestRipgrepSwappedSymlinkRace(t *testing.T) {
	for _, e := range engines(t) {
		t.Run(e.name, func(t *testing.T) {
			root, err := filepath.EvalSymlinks(t.TempDir())
			if err != nil {
				t.Fatal(err)
			}
			dir, outside := filepath.Join(root, "ws"), filepath.Join(root, "outside")
			tree, secrets := fixture{}, fixture{}
			for i := range 40 {
				tree[fmt.Sprintf("d/f%02d.txt", i)] = "needle inside\n"
				secrets[fmt.Sprintf("f%02d.txt", i)] = "needle SECRET outside\n"
			}
			// The swap partner is hidden, so only "d" is ever searched.
			tree[".swap"] = "->" + outside
			tree.write(t, dir)
			secrets.write(t, outside)
			ws, err := workspace.Open(dir)
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { ws.Close() })
			ts := newToolSet(t, ws, e.opts)

			stop := make(chan struct{})
			var swapper sync.WaitGroup
			swapper.Add(1)
			var swaps int
			go func() {
				defer swapper.Done()
				for {
					select {
					case <-stop:
						return
					default:
					}
					if err := unix.Renameat2(unix.AT_FDCWD, filepath.Join(dir, "d"), unix.AT_FDCWD, filepath.Join(dir, ".swap"), unix.RENAME_EXCHANGE); err != nil {
						t.Errorf("swap: %v", err)
						return
					}
					swaps++
					// A pause per swap leaves the CPU to the searches;
					// rg still sees the swap mid-walk many times.
					time.Sleep(20 * time.Microsecond)
				}
			}()
			ctx := testCtx(t, time.Minute)
			var escaped, inside, failed int
			for range raceCalls {
				var r grepResult
				if err := ts.call(ctx, repo.NameRipgrep, map[string]any{"query": "needle", "maxMatches": 1000}, &r); err != nil {
					failed++
					t.Logf("call failed: %v", err)
					continue
				}
				for _, m := range r.Matches {
					if strings.Contains(m.LineText, "SECRET") {
						escaped++
					} else {
						inside++
					}
				}
			}
			close(stop)
			swapper.Wait()
			t.Logf("%d calls: %d outside lines, %d inside lines, %d failed calls, %d swaps", raceCalls, escaped, inside, failed, swaps)
			if escaped > 0 {
				t.Errorf("%d lines from outside the workspace came back", escaped)
			}
			if inside == 0 {
				t.Error("no call found the workspace's own lines: the test proves nothing")
			}
			if failed > raceCalls/10 {
				t.Errorf("%d of %d calls failed", failed, raceCalls)
			}
		})
	}
}
