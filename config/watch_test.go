package config

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// TestWatcherFollowsEverySaveStyle edits the file the ways editors do and
// expects each valid edit applied within a second, and an invalid one
// reported while the last good configuration stays.
func TestWatcherFollowsEverySaveStyle(t *testing.T) {
	dir := t.TempDir()
	file := filepath.Join(dir, "config.toml")
	write := func(path, name string) {
		t.Helper()
		if err := os.WriteFile(path, []byte("[server]\nname = \""+name+"\"\n"), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	write(file, "v0")
	opts := Options{File: file, Environ: []string{}}
	cfg, err := Load(opts)
	if err != nil {
		t.Fatal(err)
	}
	applied, failed := make(chan string, 8), make(chan error, 8)
	w := NewWatcher(cfg, opts, RunWritable{Workspace: t.TempDir()}, 50*time.Millisecond,
		func(c *Config) { applied <- c.Server.Name }, func(err error) { failed <- err })
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- w.Run(ctx) }()
	defer func() {
		cancel()
		if err := <-done; err != nil {
			t.Error(err)
		}
	}()
	time.Sleep(50 * time.Millisecond) // the watch is in place

	expect := func(want string) {
		t.Helper()
		for {
			select {
			case got := <-applied:
				if got == want {
					return
				}
			case err := <-failed:
				t.Logf("transient: %v", err)
			case <-time.After(time.Second):
				t.Fatalf("%q not applied within a second", want)
			}
		}
	}

	write(file, "in-place")
	expect("in-place")

	tmp := filepath.Join(dir, ".config.toml.tmp")
	write(tmp, "renamed-over")
	if err := os.Rename(tmp, file); err != nil {
		t.Fatal(err)
	}
	expect("renamed-over")

	// Vim: move the original away, write a new file, remove the backup.
	if err := os.Rename(file, file+"~"); err != nil {
		t.Fatal(err)
	}
	write(file, "vim-style")
	os.Remove(file + "~")
	expect("vim-style")

	if err := os.WriteFile(file, []byte("[server]\nnmae = \"typo\"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-failed:
		if !strings.Contains(err.Error(), "nmae") {
			t.Fatalf("the error should name the bad key: %v", err)
		}
	case name := <-applied:
		t.Fatalf("an invalid edit was applied (%s)", name)
	case <-time.After(time.Second):
		t.Fatal("an invalid edit was not reported")
	}

	write(file, "fixed")
	expect("fixed")
	w.Reload()
	expect("fixed")
}
