package e2e

import (
	"os"
	"os/exec"
	"regexp"
	"strconv"
	"strings"
	"testing"
)

// What troupe says at start about the names Codex shows, as an operator
// reads it in serve's log and under `troupe tools`.

// longToolName is a command tool's name that, as mcp__troupe__<name>,
// passes Codex's 128-character budget: Codex cuts it.
var longToolName = "long_" + strings.Repeat("x", 115)

// troupeLog runs troupe with args (a serve reads no stdin: it ends once
// it has started) and returns its stderr split in lines.
func troupeLog(t *testing.T, args ...string) []string {
	t.Helper()
	cmd := exec.Command(troupeBinary(t), args...)
	cmd.Env = append(os.Environ(), "XDG_STATE_HOME="+stateHome, "NO_COLOR=1")
	var stderr strings.Builder
	cmd.Stderr = &stderr
	if err := cmd.Run(); err != nil {
		t.Fatalf("troupe %s: %v\n%s", strings.Join(args, " "), err, stderr.String())
	}
	return strings.Split(strings.TrimRight(stderr.String(), "\n"), "\n")
}

// linesWith is the lines that contain every one of words.
func linesWith(lines []string, words ...string) []string {
	var out []string
next:
	for _, l := range lines {
		for _, w := range words {
			if !strings.Contains(l, w) {
				continue next
			}
		}
		out = append(out, l)
	}
	return out
}

// Each downstream server's renamed tools make one line, naming only the
// tools sessions see; the cut long name is a warning, in the same format
// in serve's log and under `troupe tools`.
func TestCodexNamingIsOneLinePerServer(t *testing.T) {
	command, args := everythingStdioCommand(t)
	fx := newFixture(t)
	cfg := downstreamConfig(t, stdioServerTable("everything", command, args, "")+
		"[mcp."+longToolName+"]\ncommand = \"echo\"\n"+
		"[tools]\ndeny = [\"everything.get-sum\", \"everything.get-env\"]\n")

	serve := troupeLog(t, "serve", "--workspace", fx.dir, "--config", cfg)
	if got := linesWith(serve, "downstream: connected", "everything"); len(got) != 1 {
		t.Fatalf("everything did not connect:\n%s", strings.Join(serve, "\n"))
	}
	about := linesWith(serve, "Codex", "everything")
	if len(about) != 1 {
		t.Fatalf("want one line about Codex's names of server everything's tools, got %d:\n%s", len(about), strings.Join(serve, "\n"))
	}
	for _, denied := range []string{"get-sum", "get_sum", "get-env", "get_env"} {
		if got := linesWith(serve, denied); len(got) > 0 {
			t.Errorf("the log names the denied tool %s:\n%s", denied, strings.Join(got, "\n"))
		}
	}

	// The cut name: one warning in serve's log and one under troupe
	// tools, both in the text format of [logging].
	tint := regexp.MustCompile(`^[A-Z][a-z]{2} [ 0-9]\d \d\d:\d\d:\d\d\.\d{3} WRN `)
	tools := troupeLog(t, "tools", "--workspace", fx.dir, "--config", cfg)
	for name, lines := range map[string][]string{"serve": serve, "tools": tools} {
		cut := linesWith(lines, longToolName, "128")
		if len(cut) != 1 || !tint.MatchString(cut[0]) {
			t.Errorf("%s: want one warning in troupe's text format that Codex cuts %s, got:\n%s", name, longToolName, strings.Join(lines, "\n"))
		}
		if got := linesWith(lines, "Codex will show it under another name"); len(got) > 0 {
			t.Errorf("%s: a warning per renamed tool:\n%s", name, strings.Join(got, "\n"))
		}
	}

	// troupe tools counts the server's tools sessions see.
	out, err := exec.Command(troupeBinary(t), "tools", "--workspace", fx.dir, "--config", cfg).Output()
	if err != nil {
		t.Fatal(err)
	}
	m := regexp.MustCompile(`server everything: ready, (\d+) of (\d+) tools\n`).FindStringSubmatch(string(out))
	if m == nil {
		t.Fatalf("troupe tools does not say how many of everything's tools are served:\n%s", out)
	}
	if exposed, listed := atoi(t, m[1]), atoi(t, m[2]); exposed != listed-2 {
		t.Errorf("troupe tools: %s of %s tools, want all but the 2 denied", m[1], m[2])
	}

	// With logging.format = "json", both write JSON lines.
	jsonLine := regexp.MustCompile(`^\{"time":"[^"]+","level":"WARN"`)
	tools = troupeLog(t, "tools", "--workspace", fx.dir, "--config", cfg, "-c", `logging.format="json"`)
	if cut := linesWith(tools, longToolName, "128"); len(cut) != 1 || !jsonLine.MatchString(cut[0]) {
		t.Errorf("troupe tools with logging.format=json:\n%s", strings.Join(tools, "\n"))
	}
}

// A downstream server named fs puts its tools in the namespace of troupe's
// fs.writeFile: troupe warns when it loads such a configuration, and
// `troupe config check` says which tools each tools.allow and tools.deny
// pattern matches, so a deny of "fs.*" no longer hides both silently.
func TestServerPrefixShadowingTroupeNamespace(t *testing.T) {
	command, args := everythingStdioCommand(t)
	fx := newFixture(t)
	cfg := downstreamConfig(t, stdioServerTable("fs", command, args, "")+
		"[mcp.hello]\ncommand = \"echo\"\n"+
		"[tools]\ndeny = [\"fs.*\", \"hel?o\", \"nothing.here\"]\n")

	shadow := func(lines []string) []string { return linesWith(lines, "fs.writeFile", "server=fs", "tool_prefix") }
	serve := troupeLog(t, "serve", "--workspace", fx.dir, "--config", cfg)
	if got := shadow(serve); len(got) != 1 || !strings.Contains(got[0], "WRN") {
		t.Errorf("serve: want one warning that server fs shares fs.writeFile's namespace:\n%s", strings.Join(serve, "\n"))
	}

	cmd := exec.Command(troupeBinary(t), "config", "check", "--workspace", fx.dir, "--config", cfg)
	cmd.Env = append(os.Environ(), "XDG_STATE_HOME="+stateHome, "NO_COLOR=1")
	var stderr strings.Builder
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("config check: %v\n%s", err, stderr.String())
	}
	if got := shadow(strings.Split(stderr.String(), "\n")); len(got) != 1 {
		t.Errorf("config check: want the warning on stderr:\n%s", stderr.String())
	}
	lines := strings.Split(string(out), "\n")
	for pattern, want := range map[string][]string{
		`deny "fs.*"`:         {"fs.writeFile", "[mcp_servers.fs]"},
		`deny "hel?o"`:        {"hello"},
		`deny "nothing.here"`: {"no tool"},
	} {
		got := linesWith(lines, append([]string{"# ", pattern}, want...)...)
		if len(got) != 1 {
			t.Errorf("config check says nothing of %s matching %q:\n%s", pattern, want, out)
		}
	}
	if got := linesWith(lines, `deny "hel?o"`, "[mcp_servers.fs]"); len(got) > 0 {
		t.Errorf("hel?o cannot match fs's tools: %s", got)
	}
}

func atoi(t *testing.T, s string) int {
	t.Helper()
	n, err := strconv.Atoi(s)
	if err != nil {
		t.Fatal(err)
	}
	return n
}
