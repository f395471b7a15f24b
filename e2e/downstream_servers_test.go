package e2e

// Third-party MCP servers for the downstream-server tests: troupe connects to
// them as a client ([mcp_servers.<name>]) and re-serves their tools as
// <name>.<tool>. They are the reference MCP servers, pinned in
// e2e/downstream/package-lock.json and installed by scripts/test (npm ci):
//
//	@modelcontextprotocol/server-everything  2026.8.31  (serverInfo "mcp-servers/everything" 2.0.0)
//	@modelcontextprotocol/server-filesystem  2026.8.31  (serverInfo "secure-filesystem-server" 0.2.0)
//
// Both run on the MCP TypeScript SDK 1.32.2 (the same as e2e/tsclient) and
// negotiate protocol version 2025-11-25 with it.
//
// # server-everything
//
// Entry point dist/index.js (its "bin"); the first argument picks the
// transport: "stdio" (the default), "sse" (old HTTP+SSE) or "streamableHttp".
//
//   - stdio: node <dir>/dist/index.js stdio. Logs "Starting default (STDIO)
//     server..." on stderr; nothing but MCP on stdout.
//   - streamable HTTP: PORT=<port> node <dir>/dist/index.js streamableHttp
//     serves POST/GET/DELETE on path /mcp (sessions: Mcp-Session-Id). The
//     port comes only from $PORT (default 3001); there is no host option and
//     it calls app.listen(PORT), which binds every interface. The tests
//     therefore preload e2e/downstream/loopback.mjs (node --import), which
//     makes such a listen bind 127.0.0.1 and prints "loopback.mjs: listening
//     on 127.0.0.1:<port>" on stderr once it listens: that line is the
//     readiness signal (the server's own "MCP Streamable HTTP Server listening
//     on port <port>" says nothing of the address). A GET /mcp without a
//     session then answers 400 {"error":{"message":"Bad Request: No valid
//     session ID provided"}}. It logs every request on stdout ("Received MCP
//     POST request"), has permissive CORS (origin *), no authentication and
//     no Origin/Host check. SIGINT is its clean shutdown; SIGTERM just kills it.
//
// Tools, in tools/list order, always present (everythingTools):
//
//	echo                          {message} -> text "Echo: <message>"                      deterministic
//	get-annotated-message         {messageType: error|success|debug, includeImage?}       deterministic (annotations, optional image)
//	get-env                       {} -> the server process's environment as JSON text     NOT deterministic; shows env/env_vars reaching it
//	get-resource-links            {count 1..10, default 3} -> text + count resource_link  deterministic
//	get-resource-reference        {resourceType: text|blob, resourceId} -> embedded resource
//	get-structured-content        {location: New York|Chicago|Los Angeles} -> text JSON + structuredContent, outputSchema  deterministic
//	get-sum                       {a, b} -> text "The sum of <a> and <b> is <a+b>."       deterministic
//	get-tiny-image                {} -> text, image (image/png, fixed base64), text        deterministic
//	gzip-file-as-resource         {name, data (URL or data: URI), outputType?}            fetches URLs: avoid
//	toggle-simulated-logging      {} starts/stops notifications/message every few s      side effects per session
//	toggle-subscriber-updates     {} starts/stops notifications/resources/updated         side effects per session
//	trigger-long-running-operation {duration s (default 10), steps (default 5)}           PROGRESS: one notifications/progress per step
//	                              (progress i of total steps, only when the request has _meta.progressToken), then text
//	                              "Long running operation completed. Duration: <d> seconds, Steps: <n>."
//	simulate-research-query       {topic, ambiguous?}: execution.taskSupport "required" (MCP tasks); a plain
//	                              tools/call fails. With ambiguous=true and a client declaring elicitation it elicits.
//
// Tools registered only once the client's initialize declared a capability
// (at notifications/initialized, so they are in the first tools/list):
//
//	elicitation (form):     trigger-elicitation-request: ELICITATION, one elicitation/create with a 13-field form
//	                        (only "name" required), then text blocks "✅ User provided the requested information!",
//	                        "User inputs:\n- Name: <name>\n- Agreed to terms: <check>..." and "\nRaw result: <json>";
//	                        decline -> "❌ User declined ...", cancel -> "⚠️ User cancelled ...". Waits up to 10 min.
//	elicitation.url:        trigger-url-elicitation (URL-mode elicitation, or error -32042 with errorPath)
//	sampling:               trigger-sampling-request
//	roots:                  get-roots-list (and the server asks roots/list 350 ms after initialize)
//	elicitation + tasks.requests.elicitation.create:      trigger-elicitation-request-async
//	sampling + tasks.requests.sampling.createMessage:     trigger-sampling-request-async
//
// Its capabilities include tools.listChanged, resources (subscribe), prompts,
// logging and tasks.
//
// # server-filesystem
//
// stdio only: node <dir>/dist/index.js <allowed-dir>... It logs "Secure MCP
// Filesystem Server running on stdio" on stderr. Relative allowed
// directories resolve against its working directory, and relative tool paths
// against the allowed directory, so list_allowed_directories with "." shows
// the cwd it was started in. A client that declares the roots capability
// REPLACES the command-line directories with its roots (roots/list after
// initialize); the TS runner declares none.
//
// Tools (filesystemTools), all with outputSchema; the read/list tools return
// the text also as structuredContent {"content": "<text>"}:
//
//	read_file (deprecated alias), read_text_file {path, head?, tail?}  deterministic: the file's text
//	list_directory {path}        "[FILE] a.txt\n[DIR] sub": readdir order, NOT sorted (same dir, same order)
//	list_directory_with_sizes    sorted by name (default) or size
//	list_allowed_directories {}  "Allowed directories:\n<dir>..."                 deterministic
//	directory_tree, search_files, get_file_info (times: not deterministic),
//	read_media_file, read_multiple_files, write_file, edit_file, create_directory, move_file
//
// A path outside the allowed directories is a tool error (isError), text
// "Access denied - path outside allowed directories: <path> not in <dirs>".
// No progress, no elicitation.
//
// # The TS SDK client and progress
//
// The SDK client (1.32.2) handles a response at once but a notification one
// microtask later, so when the last progress notification and the result
// arrive together the result wins and that notification is dropped ("unknown
// token", typescript-sdk issue #2580). trigger-long-running-operation with n
// steps is therefore seen by runner.mjs as n or n-1 progress notifications.

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// everythingTools are the tools server-everything lists to any client, in
// order; everythingElicitationTools are added for a client that declares
// (form) elicitation, after these but before simulate-research-query.
var (
	everythingTools = []string{
		"echo", "get-annotated-message", "get-env", "get-resource-links",
		"get-resource-reference", "get-structured-content", "get-sum",
		"get-tiny-image", "gzip-file-as-resource", "toggle-simulated-logging",
		"toggle-subscriber-updates", "trigger-long-running-operation",
		"simulate-research-query",
	}
	everythingElicitationTools = []string{"trigger-elicitation-request"}

	filesystemTools = []string{
		"read_file", "read_text_file", "read_media_file", "read_multiple_files",
		"write_file", "edit_file", "create_directory", "list_directory",
		"list_directory_with_sizes", "directory_tree", "move_file",
		"search_files", "get_file_info", "list_allowed_directories",
	}
)

const (
	// everythingHTTPStartTimeout bounds one start of server-everything over
	// HTTP, until it listens and answers.
	everythingHTTPStartTimeout = 15 * time.Second
	// downstreamStopTimeout is how long a server may take to exit after
	// SIGTERM before its process group is killed.
	downstreamStopTimeout = 5 * time.Second
)

// downstreamPackage is the directory of an installed e2e/downstream package,
// e.g. "server-everything".
func downstreamPackage(name string) string {
	return filepath.Join(moduleRoot, "e2e", "downstream", "node_modules", "@modelcontextprotocol", name)
}

// requireDownstream skips the test when node or the pinned servers are not
// installed (scripts/test installs them), as requireRunner does for the TS
// client; in CI their absence fails the test instead.
func requireDownstream(t *testing.T) {
	t.Helper()
	var missing string
	if _, err := exec.LookPath("node"); err != nil {
		missing = "node is not on PATH"
	} else {
		for _, pkg := range []string{"server-everything", "server-filesystem"} {
			if _, err := os.Stat(filepath.Join(downstreamPackage(pkg), "dist", "index.js")); err != nil {
				missing = "e2e/downstream/node_modules has no @modelcontextprotocol/" + pkg
				break
			}
		}
	}
	if missing != "" {
		if os.Getenv("CI") != "" {
			t.Fatalf("%s; scripts/test should have installed it", missing)
		}
		t.Skipf("%s: run scripts/test (installs the downstream MCP servers)", missing)
	}
}

// nodeBinary is node's absolute path, so a command still runs when whoever
// starts it (the TS SDK, troupe) gives it a trimmed environment.
func nodeBinary(t *testing.T) string {
	t.Helper()
	node, err := exec.LookPath("node")
	if err != nil {
		t.Fatalf("node: %v", err)
	}
	if abs, err := filepath.Abs(node); err == nil {
		node = abs
	}
	return node
}

// everythingStdioCommand is how to run server-everything over stdio:
// node <e2e/downstream>/node_modules/@modelcontextprotocol/server-everything/dist/index.js stdio.
func everythingStdioCommand(t *testing.T) (command string, args []string) {
	t.Helper()
	requireDownstream(t)
	return nodeBinary(t), []string{filepath.Join(downstreamPackage("server-everything"), "dist", "index.js"), "stdio"}
}

// filesystemStdioCommand is how to run server-filesystem over stdio with dir
// as its one allowed directory (relative: against the server's cwd).
func filesystemStdioCommand(t *testing.T, dir string) (command string, args []string) {
	t.Helper()
	requireDownstream(t)
	return nodeBinary(t), []string{filepath.Join(downstreamPackage("server-filesystem"), "dist", "index.js"), dir}
}

// startEverythingHTTP runs server-everything's streamable HTTP transport on a
// free 127.0.0.1 port and returns its MCP endpoint, http://127.0.0.1:PORT/mcp,
// once it answers there. At cleanup its process group gets SIGTERM, then
// SIGKILL; its output is logged if the test failed.
func startEverythingHTTP(t *testing.T) (endpoint string) {
	t.Helper()
	requireDownstream(t)
	node := nodeBinary(t)
	var err error
	for range 5 {
		var s *downstreamProcess
		if s, err = tryStartEverythingHTTP(node); err == nil {
			t.Cleanup(func() { s.stop(t) })
			return s.url
		}
		if !errors.Is(err, errPortTaken) {
			break
		}
	}
	t.Fatalf("starting server-everything over HTTP: %v", err)
	return ""
}

// downstreamProcess is a downstream server the test started itself, leading
// its own process group.
type downstreamProcess struct {
	url    string
	cmd    *exec.Cmd
	log    *lockedWriter // stdout and stderr
	exited chan struct{} // closed once cmd.Wait has returned
}

func tryStartEverythingHTTP(node string) (*downstreamProcess, error) {
	port, err := freePort()
	if err != nil {
		return nil, err
	}
	addr := "127.0.0.1:" + strconv.Itoa(port)
	s := &downstreamProcess{url: "http://" + addr + "/mcp",
		log: &lockedWriter{b: &strings.Builder{}}, exited: make(chan struct{})}
	downstream := filepath.Join(moduleRoot, "e2e", "downstream")
	s.cmd = exec.Command(node,
		"--import", filepath.Join(downstream, "loopback.mjs"),
		filepath.Join(downstreamPackage("server-everything"), "dist", "index.js"), "streamableHttp")
	s.cmd.Dir = downstream
	s.cmd.Env = append(withoutVar(os.Environ(), "PORT"), "PORT="+strconv.Itoa(port))
	s.cmd.Stdout, s.cmd.Stderr = s.log, s.log
	s.cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := s.cmd.Start(); err != nil {
		return nil, err
	}
	go func() {
		_ = s.cmd.Wait()
		close(s.exited)
	}()

	// Ready: our preload saw it listen on this very address, and the MCP
	// endpoint answers as server-everything does.
	announced := "loopback.mjs: listening on " + addr + "\n"
	deadline := time.Now().Add(everythingHTTPStartTimeout)
	for {
		select {
		case <-s.exited:
			s.killGroup()
			if strings.Contains(s.log.String(), "EADDRINUSE") || strings.Contains(s.log.String(), "already in use") {
				return nil, errPortTaken
			}
			return nil, fmt.Errorf("server-everything exited with %v before serving; its output:\n%s", s.cmd.ProcessState, s.log)
		case <-time.After(25 * time.Millisecond):
		}
		if strings.Contains(s.log.String(), announced) && everythingAnswers(s.url) {
			return s, nil
		}
		if time.Now().After(deadline) {
			s.killGroup()
			<-s.exited
			return nil, fmt.Errorf("server-everything did not answer at %s within %v; its output:\n%s", s.url, everythingHTTPStartTimeout, s.log)
		}
	}
}

// everythingAnswers reports whether a GET of endpoint without a session gets
// server-everything's 400 "No valid session ID".
func everythingAnswers(endpoint string) bool {
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, endpoint, nil)
	resp, err := loopbackClient.Do(req)
	if err != nil {
		return false
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	return resp.StatusCode == http.StatusBadRequest && strings.Contains(string(body), "No valid session ID")
}

// killGroup kills the process and everything left in its group.
func (s *downstreamProcess) killGroup() {
	_ = syscall.Kill(-s.cmd.Process.Pid, syscall.SIGKILL)
}

// stop ends the server: SIGTERM to its process group, SIGKILL to the group
// after downstreamStopTimeout, and SIGKILL to the group again once the leader
// is gone, for any child it left behind.
func (s *downstreamProcess) stop(t *testing.T) {
	select {
	case <-s.exited:
		t.Errorf("downstream server at %s exited before the test ended: %v", s.url, s.cmd.ProcessState)
	default:
		_ = syscall.Kill(-s.cmd.Process.Pid, syscall.SIGTERM)
		select {
		case <-s.exited:
		case <-time.After(downstreamStopTimeout):
			t.Logf("downstream server at %s ignored SIGTERM for %v; killing it", s.url, downstreamStopTimeout)
			s.killGroup()
			<-s.exited
		}
	}
	s.killGroup()
	if t.Failed() {
		t.Logf("downstream server output (%s):\n%s", s.url, s.log)
	}
}
