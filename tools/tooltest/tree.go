package tooltest

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// WriteTree creates a file tree under dir. Keys are slash paths; a key
// ending in "/" is a directory, a value "->target" a symlink to target,
// anything else a file with that content.
func WriteTree(t testing.TB, dir string, tree map[string]string) {
	t.Helper()
	for name, content := range tree {
		p := filepath.Join(dir, filepath.FromSlash(name))
		if strings.HasSuffix(name, "/") {
			if err := os.MkdirAll(p, 0o755); err != nil {
				t.Fatal(err)
			}
			continue
		}
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if target, ok := strings.CutPrefix(content, "->"); ok {
			if err := os.Symlink(target, p); err != nil {
				t.Fatal(err)
			}
			continue
		}
		if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
}
