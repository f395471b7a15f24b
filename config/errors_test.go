package config

import (
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// TestErrorsSayWhereWhatAndTheNearestKey: every kind of configuration
// error is said in troupe's words, exactly: the layer (a file with its
// line, the environment variable, the -c flag), the full dotted key, the
// bad value, the problem and the nearest valid key. FILE stands for the
// config file's path. Before, these were mapstructure's and go-toml's
// words: "'limits' has invalid keys: call_timout" (first problem only, no
// line, no suggestion), "time: invalid duration" (no value), "table greet
// already exists" (no mcp., no line).
func TestErrorsSayWhereWhatAndTheNearestKey(t *testing.T) {
	cases := []struct {
		name      string
		file      string
		env       []string
		overrides []string
		want      string
	}{
		{name: "unknown keys, each one", file: "[limits]\ncall_timout = \"5s\"\npage_size = 10\nmax_in_flite = 3\n",
			want: "2 problems in the configuration:\n" +
				"  config file FILE:2: limits.call_timout: unknown key (did you mean limits.call_timeout?)\n" +
				"  config file FILE:4: limits.max_in_flite: unknown key (did you mean limits.max_in_flight?)"},
		{name: "unknown table", file: "[limit]\ncall_timeout = \"5s\"\n",
			want: "config file FILE:1: limit: unknown table (did you mean limits?)"},
		{name: "key outside its table", file: "call_timeout = \"5s\"\n",
			want: "config file FILE:1: call_timeout: unknown key (did you mean limits.call_timeout?)"},
		{name: "key in the wrong table", file: "[server]\nname = \"x\"\ncall_timeout = \"5s\"\n",
			want: "config file FILE:3: server.call_timeout: unknown key (did you mean limits.call_timeout?)"},
		{name: "unknown key of a command tool", file: "[mcp.greet]\ncomand = \"echo\"\n",
			want: "config file FILE:2: mcp.greet.comand: unknown key (did you mean mcp.greet.command?)"},
		{name: "unknown key of a dotted command tool", file: "[mcp.\"git.status\"]\ncommand = \"git\"\ndescripton = \"x\"\n",
			want: `config file FILE:3: mcp."git.status".descripton: unknown key (did you mean mcp."git.status".description?)`},
		{name: "unknown key of a downstream server", file: "[mcp_servers.everything]\ncommand = \"npx\"\nenv_var = [\"HOME\"]\n",
			want: "config file FILE:3: mcp_servers.everything.env_var: unknown key (did you mean mcp_servers.everything.env_vars?)"},
		{name: "server key in a command tool", file: "[mcp.docs]\nurl = \"https://example.com/mcp\"\n",
			want: "config file FILE:2: mcp.docs.url: unknown key (url is a key of [mcp_servers.<name>], for downstream MCP servers; [mcp.<name>] declares a command tool)"},
		{name: "wrong type", file: "[limits]\nmax_in_flight = \"many\"\n",
			want: `config file FILE:2: limits.max_in_flight = "many": want an integer, got a string`},
		{name: "fraction for an integer", file: "[limits]\n\npage_size = 2.5\n",
			want: `config file FILE:3: limits.page_size = 2.5: want an integer, got a float`},
		{name: "wrong item type", file: "[tools]\ndeny = [\"shell.*\", 3]\n",
			want: `config file FILE:2: tools.deny = ["shell.*", 3]: item 2: want a string, got an integer`},
		{name: "invalid duration", file: "[limits]\ncall_timeout = \"5 seconds\"\n",
			want: `config file FILE:2: limits.call_timeout = "5 seconds": not a duration: write a number and a unit (ns, us, ms, s, m, h), such as "90s", "5m" or "1h30m"`},
		{name: "integer for a duration", file: "[sandbox]\nkill_grace = 5\n",
			want: `config file FILE:2: sandbox.kill_grace = 5: want a duration such as "90s", "5m" or "1h30m", got an integer`},
		{name: "invalid value", file: "[http]\nread_timeout = \"-1s\"\n",
			want: `config file FILE:2: http.read_timeout = "-1s": must be positive`},
		{name: "value below the minimum", file: "[limits]\npage_size = 0\n",
			want: `config file FILE:2: limits.page_size: must be at least 1, got 0`},
		{name: "a caller's share of approval states", file: "[approvals]\nmax_states_per_caller = 0\n",
			want: `config file FILE:2: approvals.max_states_per_caller: must be between 1 and 16384, got 0`},
		{name: "missing required key", file: "\n[mcp.greet]\ndescription = \"hi\"\n",
			want: `config file FILE:2: mcp.greet.command: is required`},
		{name: "duplicate table", file: "[mcp.greet]\ncommand = \"echo\"\n\n[mcp.greet]\ncommand = \"printf\"\n",
			want: "config file FILE:4: mcp.greet: table defined twice (first at line 1); merge the two into one [mcp.greet]"},
		{name: "duplicate key", file: "[limits]\npage_size = 5\npage_size = 6\n",
			want: "config file FILE:3: limits.page_size: set twice: it is already a key at line 2"},
		{name: "duplicate key in an inline table", file: "[mcp.greet]\ncommand = \"echo\"\nenv = { LANG = \"C\", LANG = \"C.UTF-8\" }\n",
			want: "config file FILE:3: mcp.greet.env.LANG: set twice: it is already a key at line 3"},
		{name: "table made by dotted keys", file: "mcp.greet.command = \"echo\"\n[mcp.greet]\nargs = []\n",
			want: "config file FILE:2: mcp.greet: table defined twice: dotted keys at line 1 already made it"},
		{name: "TOML syntax", file: "[limits]\ncall_timeout = \"5s\n",
			want: "config file FILE:2:19: TOML syntax error: basic strings cannot have new lines"},
		{name: "TOML syntax in a header", file: "\n[limits\n",
			want: "config file FILE:2:8: TOML syntax error: expected character ]"},
		{name: "env unknown key", env: []string{"TROUPE_LIMITS__CALL_TIMOUT=5s"},
			want: "environment TROUPE_LIMITS__CALL_TIMOUT: limits.call_timout: unknown key (did you mean TROUPE_LIMITS__CALL_TIMEOUT?)"},
		{name: "env unknown table", env: []string{"TROUPE_LIMIT__CALL_TIMEOUT=5s"},
			want: "environment TROUPE_LIMIT__CALL_TIMEOUT: limit: unknown table (did you mean TROUPE_LIMITS__CALL_TIMEOUT?)"},
		{name: "env invalid duration", env: []string{"TROUPE_LIMITS__CALL_TIMEOUT=5 seconds"},
			want: `environment TROUPE_LIMITS__CALL_TIMEOUT: limits.call_timeout = "5 seconds": not a duration: write a number and a unit (ns, us, ms, s, m, h), such as "90s", "5m" or "1h30m"`},
		{name: "env invalid value", env: []string{"TROUPE_LIMITS__PAGE_SIZE=0"},
			want: "environment TROUPE_LIMITS__PAGE_SIZE: limits.page_size: must be at least 1, got 0"},
		{name: "env empty part", env: []string{"TROUPE_LIMITS____PAGE_SIZE=3"},
			want: "environment TROUPE_LIMITS____PAGE_SIZE: empty key part: levels are separated by exactly two underscores, as in TROUPE_LIMITS__CALL_TIMEOUT"},
		{name: "-c unknown key", overrides: []string{"limits.call_timout=5s"},
			want: "-c limits.call_timout=5s: limits.call_timout: unknown key (did you mean limits.call_timeout?)"},
		{name: "-c invalid duration", overrides: []string{"limits.call_timeout=5x"},
			want: `-c limits.call_timeout=5x: limits.call_timeout = "5x": not a duration: write a number and a unit (ns, us, ms, s, m, h), such as "90s", "5m" or "1h30m"`},
		{name: "-c invalid value", overrides: []string{"logging.format=xml"},
			want: `-c logging.format=xml: logging.format: must be text or json, got "xml"`},
		{name: "-c without =", overrides: []string{"limits.page_size"},
			want: "-c limits.page_size: want key=value"},
		{name: "the last layer that set a key is named", file: "[limits]\npage_size = 5\n", env: []string{"TROUPE_LIMITS__PAGE_SIZE=7"},
			overrides: []string{"limits.page_size=0"},
			want:      "-c limits.page_size=0: limits.page_size: must be at least 1, got 0"},
		{name: "every layer's problems", file: "[limits]\ncall_timout = \"5s\"\n", env: []string{"TROUPE_SERVER__NAM=x"},
			overrides: []string{"shell.enable=false"},
			want: "3 problems in the configuration:\n" +
				"  config file FILE:2: limits.call_timout: unknown key (did you mean limits.call_timeout?)\n" +
				"  environment TROUPE_SERVER__NAM: server.nam: unknown key (did you mean TROUPE_SERVER__NAME?)\n" +
				"  -c shell.enable=false: shell.enable: unknown key (did you mean shell.enabled?)"},
		{name: "secret values are not shown", file: "[mcp.deploy]\ncommand = \"deploy\"\nenv = { API_TOKEN = 12345 }\n",
			want: `config file FILE:3: mcp.deploy.env.API_TOKEN = <redacted>: want a string, got an integer`},
		{name: "secret strings are masked", file: "[http.auth]\nbearer_token = [\"abc-secret\"]\n",
			want: `config file FILE:2: http.auth.bearer_token = ["<redacted>"]: want a string, got an array`},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			file := ""
			if c.file != "" {
				file = writeConfig(t, c.file)
			}
			_, err := load(t, file, append([]string{"HOME=/nonexistent"}, c.env...), c.overrides...)
			if err == nil {
				t.Fatal("accepted")
			}
			want := c.want
			if file != "" {
				want = strings.ReplaceAll(want, "FILE", file)
			}
			if err.Error() != want {
				t.Fatalf("error\n%s\nwant\n%s", err, want)
			}
		})
	}
}

// TestErrorParts: the parts of an error can be read, not only its text.
func TestErrorParts(t *testing.T) {
	file := writeConfig(t, "[limits]\npage_size = 10\ncall_timout = \"5s\"\n")
	_, err := load(t, file, nil)
	var e *Error
	if !errors.As(err, &e) {
		t.Fatalf("%T is not a *config.Error: %v", err, err)
	}
	if e.Layer != "config file "+file || e.Line != 3 || e.Key != "limits.call_timout" || e.Hint != "did you mean limits.call_timeout?" {
		t.Fatalf("%+v", e)
	}
}

// TestConfigCheckBinaryShowsFileLineAndSuggestion runs the real troupe
// binary's `config check` on a file with a misspelt key: stderr names the
// file and line, the key and the key meant, stdout stays empty, and it
// exits non-zero.
func TestConfigCheckBinaryShowsFileLineAndSuggestion(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the binary")
	}
	bin := filepath.Join(t.TempDir(), "troupe")
	if out, err := exec.Command("go", "build", "-o", bin, "troupe/cmd/troupe").CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	file := writeConfig(t, "# my troupe\n[limits]\ncall_timout = \"30s\"\n\n[mcp.greet]\ncommand = \"echo\"\n\n[mcp.greet]\nargs = [\"hi\"]\n")
	cmd := exec.Command(bin, "config", "check", "--config", file)
	cmd.Env = []string{"HOME=" + t.TempDir(), "PATH=" + os.Getenv("PATH")}
	var stdout, stderr strings.Builder
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	err := cmd.Run()
	var exit *exec.ExitError
	if !errors.As(err, &exit) || exit.ExitCode() == 0 {
		t.Fatalf("config check: %v\nstdout: %s\nstderr: %s", err, stdout.String(), stderr.String())
	}
	if stdout.Len() != 0 {
		t.Fatalf("stdout must stay empty, got %q", stdout.String())
	}
	// The duplicate table stops parsing before the keys are checked.
	want := file + ":8: mcp.greet: table defined twice (first at line 5); merge the two into one [mcp.greet]"
	if !strings.Contains(stderr.String(), want) {
		t.Fatalf("stderr %q does not say %q", stderr.String(), want)
	}
	if err := os.WriteFile(file, []byte("# my troupe\n[limits]\ncall_timout = \"30s\"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	stderr.Reset()
	cmd = exec.Command(bin, "config", "check", "--config", file)
	cmd.Env = []string{"HOME=" + t.TempDir(), "PATH=" + os.Getenv("PATH")}
	cmd.Stderr = &stderr
	if err := cmd.Run(); !errors.As(err, &exit) || exit.ExitCode() == 0 {
		t.Fatalf("config check accepted a misspelt key: %v", err)
	}
	want = "config file " + file + ":3: limits.call_timout: unknown key (did you mean limits.call_timeout?)"
	if !strings.Contains(stderr.String(), want) {
		t.Fatalf("stderr %q does not say %q", stderr.String(), want)
	}
}
