package e2e

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"syscall"
	"testing"
	"text/tabwriter"
	"time"
)

// The official MCP conformance suite (e2e/conformance: the pinned npm
// package @modelcontextprotocol/conformance) against troupe in front of a
// downstream server that passes every server scenario alone
// (e2e/conformance/server.mjs): what a server does behind troupe it must do in
// front of it (issue 26).

// conformanceServerScenarios is how many server scenarios the pinned suite
// (0.1.16) has; a different number means the pin moved.
const conformanceServerScenarios = 32

const (
	// conformanceRunTimeout bounds one run of the whole suite. A scenario
	// that waits on an answer that never comes waits for the SDK's request
	// timeout (60 s), so a few of those fit.
	conformanceRunTimeout = 6 * time.Minute
	// conformanceFixtureStartTimeout bounds the fixture's start, until it
	// says where it listens.
	conformanceFixtureStartTimeout = 15 * time.Second
)

// conformanceGaps are the scenarios the fixture passes alone that troupe does
// not pass yet, each with the reason. The test fails if one of them passes
// through troupe: remove it here as its fix lands, so that from then on it
// must keep passing. Since issue 26 (prompts, resources, completions and
// sampling through the gateway) every scenario passes and the list is empty.
var conformanceGaps = map[string]string{}

// TestConformanceThroughTroupe runs the suite's server scenarios against the
// fixture alone, then against troupe serving streamable HTTP with the fixture
// as its one downstream server (tool_prefix = "", requires_approval = false),
// and requires every scenario that passed alone to pass through troupe, but
// for conformanceGaps.
func TestConformanceThroughTroupe(t *testing.T) {
	dir := requireConformance(t)
	scenarios := conformanceScenarios(t, dir)
	if len(scenarios) != conformanceServerScenarios {
		t.Errorf("the suite lists %d server scenarios, want %d (did the pin in e2e/conformance move?): %q",
			len(scenarios), conformanceServerScenarios, scenarios)
	}
	for name := range conformanceGaps {
		if !slices.Contains(scenarios, name) {
			t.Errorf("conformanceGaps names %q, which the suite does not have", name)
		}
	}

	fixture := startConformanceFixture(t, dir)
	alone := runConformance(t, dir, fixture.url)

	cfg := downstreamConfig(t, fmt.Sprintf("[mcp_servers.conformance]\nurl = %q\ntool_prefix = \"\"\nrequires_approval = false\nsampling = true\n", fixture.url))
	fx := newFixture(t)
	srv := startHTTPServer(t, fx.dir, "", "--config", cfg)
	via := runConformance(t, dir, srv.url)

	var report strings.Builder
	tw := tabwriter.NewWriter(&report, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "scenario\talone\tthrough troupe\twhy not")
	for _, name := range scenarios {
		a, v := alone[name], via[name]
		why := v.reason
		if gap, ok := conformanceGaps[name]; ok && !v.passed {
			why = "known gap (" + gap + "): " + v.reason
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\n", name, a, v, why)

		switch _, gap := conformanceGaps[name]; {
		case !a.passed:
			t.Errorf("%s: the fixture fails it alone (%s); it must pass every scenario", name, a.reason)
		case gap && v.passed:
			t.Errorf("%s: passes through troupe now; remove it from conformanceGaps", name)
		case !gap && !v.passed:
			t.Errorf("%s: passes alone, fails through troupe: %s", name, v.reason)
		}
	}
	tw.Flush()
	t.Logf("the conformance suite, alone and through troupe:\n%s", report.String())
}

// requireConformance returns the e2e/conformance directory once node and the
// pinned suite are installed (scripts/test installs them); outside CI it
// skips the test when they are not.
func requireConformance(t *testing.T) string {
	t.Helper()
	dir := filepath.Join(moduleRoot, "e2e", "conformance")
	var missing string
	if _, err := exec.LookPath("node"); err != nil {
		missing = "node is not on PATH"
	} else {
		for _, pkg := range []string{"conformance", "sdk"} {
			if _, err := os.Stat(filepath.Join(dir, "node_modules", "@modelcontextprotocol", pkg, "package.json")); err != nil {
				missing = "e2e/conformance/node_modules has no @modelcontextprotocol/" + pkg
				break
			}
		}
	}
	if missing != "" {
		if os.Getenv("CI") != "" {
			t.Fatalf("%s; scripts/test should have installed it", missing)
		}
		t.Skipf("%s: run scripts/test (installs the MCP conformance suite)", missing)
	}
	return dir
}

// conformanceCommand is the suite's CLI with args, run in dir. The CLI is
// built for Node 22 but runs on Node 20 with fsglob.mjs preloaded (see there).
func conformanceCommand(ctx context.Context, t *testing.T, dir string, args ...string) *exec.Cmd {
	cli := filepath.Join(dir, "node_modules", "@modelcontextprotocol", "conformance", "dist", "index.js")
	cmd := exec.CommandContext(ctx, nodeBinary(t), append([]string{"--import", "./fsglob.mjs", cli}, args...)...)
	cmd.Dir = dir
	cmd.WaitDelay = 10 * time.Second
	return cmd
}

// conformanceScenarios lists the suite's server scenarios, in its order.
func conformanceScenarios(t *testing.T, dir string) []string {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()
	out, err := conformanceCommand(ctx, t, dir, "list", "--server").CombinedOutput()
	if err != nil {
		t.Fatalf("conformance list --server: %v\n%s", err, out)
	}
	var names []string
	for line := range strings.Lines(string(out)) {
		if rest, ok := strings.CutPrefix(strings.TrimSpace(line), "- "); ok {
			names = append(names, strings.Fields(rest)[0])
		}
	}
	if len(names) == 0 {
		t.Fatalf("conformance list --server listed no scenario:\n%s", out)
	}
	return names
}

// conformanceVerdict is one scenario's outcome. It passed when none of its
// checks is a FAILURE or a WARNING (the suite's own rule for its baselines of
// expected failures); reason is the first such check otherwise.
type conformanceVerdict struct {
	ran    bool
	passed bool
	reason string
}

func (v conformanceVerdict) String() string {
	switch {
	case !v.ran:
		return "not run"
	case v.passed:
		return "pass"
	}
	return "FAIL"
}

// resultDirName is the directory the CLI writes a scenario's checks.json in:
// server-<scenario>-<timestamp>.
var resultDirName = regexp.MustCompile(`^server-(.+)-\d{4}-\d{2}-\d{2}T[\d-]+Z$`)

// runConformance runs every server scenario (--suite all) against the MCP
// endpoint url and returns each one's verdict by name. The CLI's exit status
// only says whether something failed, so the verdicts come from the
// checks.json it writes per scenario.
func runConformance(t *testing.T, dir, url string) map[string]conformanceVerdict {
	t.Helper()
	results := t.TempDir()
	ctx, cancel := context.WithTimeout(t.Context(), conformanceRunTimeout)
	defer cancel()
	cmd := conformanceCommand(ctx, t, dir, "server", "--suite", "all", "--url", url, "-o", results)
	start := time.Now()
	out, err := cmd.CombinedOutput()
	t.Logf("the conformance suite against %s took %v", url, time.Since(start).Round(time.Millisecond))
	var exit *exec.ExitError
	switch {
	case ctx.Err() != nil:
		t.Fatalf("the conformance suite against %s did not end within %v:\n%s", url, conformanceRunTimeout, out)
	case err != nil && !errors.As(err, &exit):
		t.Fatalf("running the conformance suite: %v", err)
	}

	entries, err := os.ReadDir(results)
	if err != nil {
		t.Fatal(err)
	}
	verdicts := map[string]conformanceVerdict{}
	for _, e := range entries {
		m := resultDirName.FindStringSubmatch(e.Name())
		if m == nil {
			continue
		}
		data, err := os.ReadFile(filepath.Join(results, e.Name(), "checks.json"))
		if err != nil {
			t.Fatalf("scenario %s: %v", m[1], err)
		}
		verdicts[m[1]] = judgeChecks(t, m[1], data)
	}
	if len(verdicts) == 0 {
		t.Fatalf("the conformance suite against %s wrote no results:\n%s", url, out)
	}
	return verdicts
}

// judgeChecks reads one scenario's checks.json.
func judgeChecks(t *testing.T, scenario string, data []byte) conformanceVerdict {
	t.Helper()
	var checks []struct {
		ID           string `json:"id"`
		Status       string `json:"status"`
		ErrorMessage string `json:"errorMessage"`
	}
	if err := json.Unmarshal(data, &checks); err != nil {
		t.Fatalf("scenario %s: checks.json: %v", scenario, err)
	}
	for _, c := range checks {
		if c.Status == "FAILURE" || c.Status == "WARNING" {
			msg := c.ErrorMessage
			if msg == "" {
				msg = "(no message)"
			}
			return conformanceVerdict{ran: true, reason: fmt.Sprintf("%s %s: %s", c.Status, c.ID, oneLine(msg))}
		}
	}
	return conformanceVerdict{ran: true, passed: true}
}

// oneLine keeps a check's message to one line of the report.
func oneLine(s string) string {
	s = strings.Join(strings.Fields(s), " ")
	if len(s) > 200 {
		s = s[:200] + "…"
	}
	return s
}

// startConformanceFixture runs e2e/conformance/server.mjs on a free loopback
// port of its choosing and returns it once it says where it listens. At
// cleanup its process group gets SIGTERM, then SIGKILL; its output is logged
// if the test failed.
func startConformanceFixture(t *testing.T, dir string) *downstreamProcess {
	t.Helper()
	s := &downstreamProcess{log: &lockedWriter{b: &strings.Builder{}}, exited: make(chan struct{})}
	s.cmd = exec.Command(nodeBinary(t), "server.mjs")
	s.cmd.Dir = dir
	s.cmd.Env = withoutVar(os.Environ(), "PORT")
	s.cmd.Stdout, s.cmd.Stderr = s.log, s.log
	s.cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := s.cmd.Start(); err != nil {
		t.Fatalf("starting the conformance fixture: %v", err)
	}
	go func() {
		_ = s.cmd.Wait()
		close(s.exited)
	}()
	announced := regexp.MustCompile(`conformance fixture: listening on (http://127\.0\.0\.1:\d+/mcp)\n`)
	deadline := time.Now().Add(conformanceFixtureStartTimeout)
	for {
		select {
		case <-s.exited:
			s.killGroup()
			t.Fatalf("the conformance fixture exited with %v before serving; its output:\n%s", s.cmd.ProcessState, s.log)
		case <-time.After(25 * time.Millisecond):
		}
		if m := announced.FindStringSubmatch(s.log.String()); m != nil {
			s.url = m[1]
			t.Cleanup(func() { s.stop(t) })
			return s
		}
		if time.Now().After(deadline) {
			s.killGroup()
			<-s.exited
			t.Fatalf("the conformance fixture did not listen within %v; its output:\n%s", conformanceFixtureStartTimeout, s.log)
		}
	}
}
