package e2e

import (
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

// toolNames lists the tools the server shows now.
func (s *stdioServer) toolNames(id int) string {
	s.t.Helper()
	s.send(`{"jsonrpc":"2.0","id":` + itoa(id) + `,"method":"tools/list"}`)
	m := s.recv()
	var names []string
	for _, tl := range m["result"].(map[string]any)["tools"].([]any) {
		names = append(names, tl.(map[string]any)["name"].(string))
	}
	return strings.Join(names, ",")
}

// expectListChanged waits for notifications/tools/list_changed.
func (s *stdioServer) expectListChanged() {
	s.t.Helper()
	deadline := time.After(5 * time.Second)
	for {
		select {
		case l, ok := <-s.lines:
			if !ok {
				s.t.Fatal("troupe closed stdout")
			}
			if strings.Contains(l, `"notifications/tools/list_changed"`) {
				return
			}
			s.t.Fatalf("unexpected message while waiting for list_changed: %s", l)
		case <-deadline:
			s.t.Fatal("no notifications/tools/list_changed after the edit")
		}
	}
}

func TestConfigReloadWhileConnected(t *testing.T) {
	fx := newFixture(t)
	dir := t.TempDir()
	file := filepath.Join(dir, "config.toml")
	write := func(path, deny string) {
		t.Helper()
		if err := os.WriteFile(path, []byte("[tools]\ndeny = ["+deny+"]\n"), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	write(file, "")
	s := startServer(t, fx.dir, "--config", file)
	s.initialize("2025-06-18")
	if got := s.toolNames(1); got != "docs.fetch,fs.writeFile,repo.listDir,repo.readFile,repo.ripgrep,shell.exec" {
		t.Fatalf("start: %s", got)
	}

	write(file, `"repo.ripgrep"`) // written in place
	s.expectListChanged()
	if got := s.toolNames(2); got != "docs.fetch,fs.writeFile,repo.listDir,repo.readFile,shell.exec" {
		t.Fatalf("after an in-place edit: %s", got)
	}

	tmp := filepath.Join(dir, "config.toml.new")
	write(tmp, `"repo.list*"`) // saved by rename, as many editors do
	if err := os.Rename(tmp, file); err != nil {
		t.Fatal(err)
	}
	s.expectListChanged()
	if got := s.toolNames(3); got != "docs.fetch,fs.writeFile,repo.readFile,repo.ripgrep,shell.exec" {
		t.Fatalf("after a rename save: %s", got)
	}

	// An invalid edit keeps the last good configuration.
	if err := os.WriteFile(file, []byte("[tools]\ndeny = [\"[\"]\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	time.Sleep(600 * time.Millisecond)
	if got := s.toolNames(4); got != "docs.fetch,fs.writeFile,repo.readFile,repo.ripgrep,shell.exec" {
		t.Fatalf("after an invalid edit: %s", got)
	}
	if !strings.Contains(s.stderrText(), "keeping the last good configuration") {
		t.Fatalf("the invalid edit was not logged:\n%s", s.stderrText())
	}

	// SIGHUP reloads without any edit: one more "configuration reloaded".
	write(file, `"repo.readFile"`)
	s.expectListChanged()
	before := strings.Count(s.stderrText(), "configuration reloaded")
	if err := s.cmd.Process.Signal(syscall.SIGHUP); err != nil {
		t.Fatal(err)
	}
	for end := time.Now().Add(3 * time.Second); strings.Count(s.stderrText(), "configuration reloaded") == before; {
		if time.Now().After(end) {
			t.Fatal("SIGHUP did not reload the configuration")
		}
		time.Sleep(20 * time.Millisecond)
	}
	if got := s.toolNames(5); got != "docs.fetch,fs.writeFile,repo.listDir,repo.ripgrep,shell.exec" {
		t.Fatalf("after SIGHUP: %s", got)
	}
}
