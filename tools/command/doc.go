// Package command builds command tools: tools the configuration declares,
// each of which runs one program per call. The program gets the call's
// arguments on its argv (where the definition puts placeholders) and as
// JSON on stdin; its stdout is the result.
//
// # Using the package
//
// The config package turns an [mcp.<name>] entry into a Definition; New
// checks it and returns a tools.Tool for the registry:
//
//	t, err := command.New(command.Definition{
//		Name:        "lint",
//		Description: "Runs the linter on one file.",
//		Command:     "golangci-lint", // found on PATH
//		Args:        []string{"run", "--", "{file}"},
//		InputSchema: json.RawMessage(`{"type":"object",
//			"properties":{"file":{"type":"string"}},"required":["file"]}`),
//		Timeout: 30 * time.Second,
//	}, workspaceDir)
//	if err != nil {
//		return err // names the tool and what is wrong with it
//	}
//	reg, err := tools.NewRegistry(t)
//
// New refuses a definition with a bad name, a program that is not there
// (an absolute path) or not on PATH (a bare name), a placeholder that
// names no property of the input schema, a stray brace, a schema that
// does not compile, a working directory outside the workspace or an env
// variable the kernel cannot pass.
//
// # Arguments
//
// The program is never run through a shell: argv is built element by
// element and passed to execve, so quotes, ";", "$(...)", "*" and
// newlines in a value reach the program as they are.
//
// An element of Definition.Args is literal text with placeholders:
// "{name}" stands for the argument called name, a top-level property of
// the input schema (names use A-Z a-z 0-9 _ - .). "{{" and "}}" are
// literal braces; any other brace is an error when the tool is built. A
// value becomes text as follows:
//
//   - a string: its characters, as they are;
//   - a number or a boolean: its JSON text ("3", "2.5", "1e3", "true");
//   - an object: compact JSON;
//   - an array, when the placeholder is the whole element ("{files}"):
//     each item becomes an element of its own (rendered by these rules;
//     nested arrays as compact JSON), and an empty array none. An array
//     cannot fill part of an element ("--file={files}"): New refuses that
//     for a property whose schema type allows "array", and a call that
//     sends one anyway fails with invalid_argument;
//   - a missing argument or null: a whole-element placeholder drops the
//     element ("{flag}" is simply absent); inside a larger element it is
//     the empty string ("--name={name}" becomes "--name=").
//
// A value with a NUL character cannot be passed and fails the call with
// invalid_argument.
//
// Values reach the program literally, which also means a string that
// starts with "-" looks like an option to most programs. Put "--" before
// positional placeholders, or give the property a "pattern" in the
// schema. Do not splice placeholders into a "sh -c" script either; pass
// them as the script's positional parameters instead:
//
//	Command: "sh",
//	Args:    []string{"-c", `grep -rn -- "$1" .`, "sh", "{pattern}"},
//
// The whole arguments object also goes to the program's stdin as JSON
// (exactly as validated), after which stdin is closed. A program that
// does not read it does no harm.
//
// # Working directory
//
// The session's cwd override wins, then Definition.Cwd, then the
// workspace root. Relative paths start at the workspace; absolute ones
// are accepted when they lie inside it. The directory must stay inside
// the workspace both as written and with every symlink resolved,
// otherwise the call fails with permission_denied (a missing directory
// is not_found). Messages quote the path as written, not the host path.
//
// # Environment
//
// A program does not inherit the server's environment. It starts from
// this baseline, taken from the server when New runs:
//
//	PATH    the server's (or /usr/local/bin:/usr/bin:/bin if it has none)
//	HOME    the server's, if set
//	LANG    the server's, if set
//	LC_ALL  the server's, if set
//	TMPDIR  the server's temporary directory (os.TempDir)
//	TERM    dumb
//
// Definition.Env is laid over it, and the session's env overrides over
// that: later layers win, an empty value sets the variable to "". A bare
// Command is looked up on the PATH of this merged environment at every
// call (absolute PATH entries only).
//
// Values of variables from Definition.Env and the session overrides whose
// names look secret (containing TOKEN, SECRET, PASSWORD, PASSWD,
// PASSPHRASE, CREDENTIAL, API_KEY, APIKEY, PRIVATE_KEY or ACCESS_KEY, or
// ending in _KEY) and that are at least six bytes long are replaced by
// "[redacted]" wherever they appear in what the client gets: the result,
// error messages and streamed lines.
//
// # Process lifecycle
//
// The program leads a process group of its own. When the call is
// cancelled (the client cancels, the server's deadline passes, the
// session ends, troupe shuts down) or runs past its timeout, the whole
// group gets SIGTERM, and SIGKILL once Definition.KillGrace (default 2 s)
// has passed; the group is killed sooner if the program has exited and
// nothing holds its output open any more. When the program exits by
// itself, anything it left running in its group is killed at once. The
// program is always reaped, and a call never hangs on a descendant that
// keeps stdout open: only one that left the group (setsid) can, and its
// pipes are closed half a second after the group is gone. A descendant
// that leaves the group is out of this package's reach; process
// sandboxing (a PID namespace) is what contains those.
//
// The time limit is Definition.Timeout (default 120 s) or the context's
// deadline, whichever comes first.
//
// # Results
//
// stdout and stderr are read as the program writes them; of each, the
// first and the last 512 KiB are kept (MaxOutputBytes in all) and every
// byte is counted, so a program that prints gigabytes costs a megabyte.
// Text that is not UTF-8 is repaired with U+FFFD.
//
//   - Exit status 0: stdout is the result's text. When stdout was cut,
//     the text says how many bytes were left out between head and tail.
//     _meta["dev.troupe/process"] carries exitCode, stdoutBytes,
//     stderrBytes, stdoutTruncated and durationMs. stderr is not part of
//     a successful result (stream it to see it).
//   - With an output schema, stdout must also be a JSON object that
//     validates; it becomes structuredContent. Output that does not is
//     an internal error listing the violations: the program broke its
//     declared contract, which the model cannot fix by changing the
//     arguments.
//   - Any other exit status, or death by a signal troupe did not send:
//     a command_failed error (KindCommandFailed) giving the status, the
//     end of stdout (up to 16 KiB) and of stderr (up to 2 KiB).
//   - Timeout: a deadline_exceeded error with the same excerpts of the
//     partial output.
//   - Cancellation (ctx done): Call returns ctx.Err() once the group is
//     gone; the caller answers the client.
//   - The program cannot be started (missing, not executable, wrong
//     format): an internal error naming the configured command.
//
// # Streaming
//
// With Definition.Streaming, and a Reporter on the request, output lines
// are forwarded while the program runs. Every 100 ms the lines gathered
// since the last send go out as one progress notification (the counter
// is the number of lines so far, the message the newest line) and one log
// message per stream ("info" for stdout, "warning" for stderr; data
// {"tool", "stream", "text"} with the lines joined by newlines, plus
// "droppedLines" when some were dropped). The pipe readers never wait for
// the client: lines over 4 KiB are cut, and at most 64 KiB of lines per
// stream wait for the next send; the rest are counted and dropped from
// the stream (never from the result).
//
// # Spec
//
// Annotations: readOnlyHint false; destructiveHint true when any side
// effect is declared, false when none is; openWorldHint true when
// SideEffects holds "network" or AllowNetwork is set. _meta holds, under
// "dev.troupe/": requires_approval, sandbox_profile ("default" when
// unset), allow_network, default_timeout_ms, allows_streaming,
// side_effects (always a list) and version (when set). troupe does not
// enforce them here; the approval gate and the sandbox read them.
package command
