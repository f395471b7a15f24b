package app

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"troupe/config"
	"troupe/redact"
)

// syncBuffer is a log sink the test reads while the server writes.
type syncBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *syncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *syncBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

// stdioClient talks to Run over a pair of pipes.
// runStdio runs a over pipes, as over stdio, and initializes a session:
// the client, the pipe to close to end the run, and Run's result.
func runStdio(t *testing.T, a *App) (*stdioClient, *io.PipeWriter, chan error) {
	t.Helper()
	inR, inW := io.Pipe()
	outR, outW := io.Pipe()
	c := &stdioClient{t: t, in: inW, lines: make(chan string, 16)}
	go func() {
		defer close(c.lines)
		sc := bufio.NewScanner(outR)
		for sc.Scan() {
			c.lines <- sc.Text()
		}
	}()
	ready, done := make(chan struct{}), make(chan error, 1)
	go func() {
		done <- a.Run(context.Background(), RunOptions{Stdin: inR, Stdout: outW, Ready: func() { close(ready) }})
	}()
	<-ready
	c.send(`{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"t","version":"1"}}}`)
	c.answer(1)
	c.send(`{"jsonrpc":"2.0","method":"notifications/initialized"}`)
	return c, inW, done
}

// endStdio ends the input of a run runStdio started and waits (bounded)
// for Run to return without error.
func endStdio(t *testing.T, in *io.PipeWriter, done chan error) {
	t.Helper()
	in.Close()
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("Run: %v", err)
		}
	case <-time.After(30 * time.Second): // a bound against hanging
		t.Fatal("Run did not return after stdin ended")
	}
}

type stdioClient struct {
	t     *testing.T
	in    *io.PipeWriter
	lines chan string
}

func (c *stdioClient) send(line string) {
	c.t.Helper()
	if _, err := io.WriteString(c.in, line+"\n"); err != nil {
		c.t.Fatal(err)
	}
}

// answer reads until the response to id and returns its result.
func (c *stdioClient) answer(id int) map[string]any {
	c.t.Helper()
	// A bound against hanging, not a timing requirement.
	deadline := time.After(30 * time.Second)
	for {
		select {
		case l, ok := <-c.lines:
			if !ok {
				c.t.Fatal("the server closed stdout")
			}
			var m struct {
				ID     *int           `json:"id"`
				Result map[string]any `json:"result"`
				Error  any            `json:"error"`
			}
			if err := json.Unmarshal([]byte(l), &m); err != nil {
				c.t.Fatalf("%v: %s", err, l)
			}
			if m.ID == nil || *m.ID != id {
				continue // a notification
			}
			if m.Error != nil {
				c.t.Fatalf("request %d: %s", id, l)
			}
			return m.Result
		case <-deadline:
			c.t.Fatalf("no answer to request %d", id)
		}
	}
}

// notified reads until a notification of method arrives.
func (c *stdioClient) notified(method string) {
	c.t.Helper()
	deadline := time.After(30 * time.Second) // a bound against hanging
	for {
		select {
		case l, ok := <-c.lines:
			if !ok {
				c.t.Fatal("the server closed stdout")
			}
			if strings.Contains(l, `"method":"`+method+`"`) {
				return
			}
		case <-deadline:
			c.t.Fatalf("no %s", method)
		}
	}
}

// toolNames lists the tools the session sees now.
func (c *stdioClient) toolNames(id int) string {
	c.t.Helper()
	c.send(`{"jsonrpc":"2.0","id":` + strconv.Itoa(id) + `,"method":"tools/list"}`)
	var names []string
	for _, tl := range c.answer(id)["tools"].([]any) {
		names = append(names, tl.(map[string]any)["name"].(string))
	}
	return strings.Join(names, ",")
}

// TestRunServesStdioAndReloads: Run serves a session over stdio; Reload
// puts a new tool set and log level into force, names the start-only
// parts that changed (and only those), and refuses an invalid tool set as
// a whole, keeping the last good configuration; Run returns nil once stdin
// ends.
func TestRunServesStdioAndReloads(t *testing.T) {
	home := t.TempDir()
	load := func(overrides ...string) *config.Config {
		t.Helper()
		cfg, err := config.Load(config.Options{
			Overrides: append([]string{"codex.enabled=false", "audit.enabled=false"}, overrides...),
			Environ:   []string{"HOME=" + home},
		})
		if err != nil {
			t.Fatal(err)
		}
		return cfg
	}
	var logs syncBuffer
	var level slog.LevelVar
	a, err := New(load(), Options{Workspace: t.TempDir(), Version: "test",
		Logger: slog.New(slog.NewTextHandler(&logs, nil)), Level: &level, Secrets: &redact.Live{}})
	if err != nil {
		t.Fatal(err)
	}
	defer a.Close()
	if err := a.Reload(load()); err == nil {
		t.Fatal("Reload before Run succeeded")
	}

	c, inW, done := runStdio(t, a)
	if got := c.toolNames(2); got != "docs.fetch,fs.writeFile,repo.listDir,repo.readFile,repo.ripgrep,shell.exec" {
		t.Fatalf("at start: %s", got)
	}

	if err := a.Reload(load(`tools.deny=["repo.readFile"]`, `logging.level="debug"`, "limits.page_size=7")); err != nil {
		t.Fatal(err)
	}
	c.notified("notifications/tools/list_changed") // the session has the new tool set
	if got := c.toolNames(3); got != "docs.fetch,fs.writeFile,repo.listDir,repo.ripgrep,shell.exec" {
		t.Fatalf("after the reload: %s", got)
	}
	if level.Level() != slog.LevelDebug {
		t.Errorf("log level %v after reloading logging.level = debug", level.Level())
	}
	warned := logs.String()
	if !strings.Contains(warned, "take effect at the next start") || !strings.Contains(warned, "[limits]") ||
		strings.Contains(warned, "[approvals]") || strings.Contains(warned, "logging.level") {
		t.Errorf("the reload should name [limits] alone as waiting for the next start:\n%s", warned)
	}

	// A tool set troupe refuses (a command tool named like a first-party
	// one) changes nothing.
	if err := a.Reload(load(`mcp."repo.listDir".command="true"`)); err == nil || !strings.Contains(err.Error(), "repo.listDir") {
		t.Fatalf("an invalid tool set: %v", err)
	}
	if got := c.toolNames(4); got != "docs.fetch,fs.writeFile,repo.listDir,repo.ripgrep,shell.exec" {
		t.Fatalf("after a refused reload: %s", got)
	}
	if a.config().Limits.PageSize != 7 {
		t.Errorf("the configuration in force is not the last good one")
	}

	// Turning [cluster] on waits for the next start (a node joins and
	// leaves a cluster only as a new process), named as such.
	before := len(logs.String())
	if err := a.Reload(load(`tools.deny=["repo.readFile"]`, `logging.level="debug"`, "limits.page_size=7",
		"cluster.provider=etcd", "cluster.listen=127.0.0.1:7001", `cluster.etcd_endpoints=["127.0.0.1:2379"]`,
		"cluster.tls_insecure=true", "approvals.state_key="+strings.Repeat("ab", 32))); err != nil {
		t.Fatal(err)
	}
	if warned := logs.String()[before:]; !strings.Contains(warned, "take effect at the next start") || !strings.Contains(warned, "[cluster]") {
		t.Errorf("a reload that changes [cluster] should name it as waiting for the next start:\n%s", warned)
	}

	endStdio(t, inW, done)
	if err := a.Reload(load()); err == nil {
		t.Fatal("Reload after Run succeeded")
	}
}
