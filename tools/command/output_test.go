package command_test

import (
	"encoding/json"
	"runtime"
	"strings"
	"testing"
	"time"

	"troupe/protocol"
	"troupe/spool"
	"troupe/tools"
	"troupe/tools/command"
)

const countSchema = `{"type":"object","properties":{"count":{"type":"integer","minimum":0}},"required":["count"]}`

// With an output schema, stdout that validates is also structuredContent;
// anything else is an internal error saying what is wrong.
func TestStructuredOutput(t *testing.T) {
	t.Parallel()
	tool := func(out string) tools.Tool {
		// Literal braces in Args are written doubled.
		def := shDef(`printf '%s' "$1"`, strings.NewReplacer("{", "{{", "}", "}}").Replace(out))
		def.OutputSchema = json.RawMessage(countSchema)
		return newTool(t, def, "")
	}

	res, err := call(testCtx(t, 10*time.Second), t, tool(`{ "count": 3 }`+"\n"), nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	if res.Content[0].Text != `{ "count": 3 }`+"\n" {
		t.Errorf("text %q", res.Content[0].Text)
	}
	if sc, ok := res.StructuredContent.(json.RawMessage); !ok || string(sc) != `{"count":3}` {
		t.Errorf("structuredContent %v", res.StructuredContent)
	}

	big := shDef(`yes | head -c 2000000`)
	big.OutputSchema = json.RawMessage(countSchema)
	_, err = call(testCtx(t, 10*time.Second), t, newTool(t, big, ""), nil, nil)
	if te := wantToolError(t, err, tools.KindInternal); !strings.Contains(te.Message, "output (2000000 bytes) is too large") {
		t.Errorf("message %q", te.Message)
	}

	for _, c := range []struct{ out, want string }{
		{`{"count": -1}`, "at /count: minimum"},
		{`{"total": 1}`, "missing property 'count'"},
		{`[1, 2]`, "not a JSON object"},
		{`count: 3`, "not a JSON object"},
		{``, "not a JSON object"},
	} {
		_, err := call(testCtx(t, 10*time.Second), t, tool(c.out), nil, nil)
		te := wantToolError(t, err, tools.KindInternal)
		if !strings.Contains(te.Message, c.want) {
			t.Errorf("output %q: message %q lacks %q", c.out, te.Message, c.want)
		}
	}
}

// The success result: stdout as text, process facts in _meta.
func TestResultMeta(t *testing.T) {
	t.Parallel()
	tl := newTool(t, shDef(`printf 'out\377put'; printf 'e' >&2`), "")
	res, err := call(testCtx(t, 10*time.Second), t, tl, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	if res.Content[0].Text != "out\uFFFDput" {
		t.Errorf("text %q: invalid UTF-8 must be repaired", res.Content[0].Text)
	}
	m := res.Meta[protocol.MetaPrefix+"process"].(map[string]any)
	if m["exitCode"] != 0 || m["stdoutBytes"] != int64(7) || m["stderrBytes"] != int64(1) || m["stdoutTruncated"] != false {
		t.Errorf("meta %v", m)
	}
	if res.StructuredContent != nil {
		t.Errorf("structuredContent %v without an output schema", res.StructuredContent)
	}
}

// 50 MB of output cost about a megabyte: head and tail are kept, the rest
// counted.
func TestHugeOutputIsBounded(t *testing.T) {
	const size = 50_000_000
	tl := newTool(t, shDef(`yes | head -c 50000000; yes e | head -c 50000000 >&2`), "")
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	res, err := call(testCtx(t, 60*time.Second), t, tl, nil, nil)
	runtime.ReadMemStats(&after)
	if err != nil {
		t.Fatal(err)
	}
	out := res.Content[0].Text
	if len(out) > command.MaxOutputBytes+100 || !strings.HasPrefix(out, "y\ny\n") || !strings.HasSuffix(out, "y\ny\n") {
		t.Fatalf("output of %d bytes: %q ... %q", len(out), out[:10], out[len(out)-10:])
	}
	if !strings.Contains(out, "\n[... 48951424 bytes of stdout omitted ...]\n") {
		t.Errorf("output does not say what was left out: %q", out[command.MaxOutputBytes/2-10:command.MaxOutputBytes/2+60])
	}
	m := res.Meta[protocol.MetaPrefix+"process"].(map[string]any)
	if m["stdoutBytes"] != int64(size) || m["stderrBytes"] != int64(size) || m["stdoutTruncated"] != true {
		t.Errorf("meta %v", m)
	}
	if alloc := after.TotalAlloc - before.TotalAlloc; alloc > 32<<20 {
		t.Errorf("the call allocated %d MiB for 100 MB of output", alloc>>20)
	}
}

// Streaming forwards lines as they come: progress with a growing counter
// and the newest line, logs with every line at info (stdout) or warning
// (stderr), all before the call returns.
func TestStreaming(t *testing.T) {
	t.Parallel()
	def := shDef(`for i in 1 2 3 4 5; do echo "out $i"; echo "err $i" >&2; sleep 0.05; done; printf 'no newline'`)
	def.Streaming = true
	tl := newTool(t, def, "")
	rec := &recorder{}
	start := time.Now()
	out := callText(t, tl, nil, &tools.Request{Reporter: rec, WantsProgress: true})
	elapsed := time.Since(start)
	if !strings.HasSuffix(out, "out 5\nno newline") {
		t.Fatalf("output %q", out)
	}

	rec.mu.Lock()
	defer rec.mu.Unlock()
	if len(rec.progress) < 2 {
		t.Fatalf("%d progress notifications, want several over %s", len(rec.progress), elapsed)
	}
	// 2,000,000 lines of 2 bytes fill at most 4e6/64Ki full batches; the
	// rest go at most every 100 ms.
	if max := int(elapsed/(100*time.Millisecond)) + 2 + 4_000_000/(64<<10) + 1; len(rec.progress) > max {
		t.Errorf("%d progress notifications in %s, want at most %d", len(rec.progress), elapsed, max)
	}
	for i := 1; i < len(rec.progress); i++ {
		if rec.progress[i].done <= rec.progress[i-1].done {
			t.Fatalf("progress does not grow: %+v", rec.progress)
		}
	}
	if last := rec.progress[len(rec.progress)-1]; last.done != 11 || last.message != "no newline" {
		t.Errorf("last progress %+v, want 11 lines with the newest", last)
	}
	var lines = map[protocol.LoggingLevel][]string{}
	for _, l := range rec.logs {
		if l.data["tool"] != "sh" {
			t.Errorf("log %v does not name the tool", l.data)
		}
		stream := map[protocol.LoggingLevel]string{protocol.LevelInfo: "stdout", protocol.LevelWarning: "stderr"}[l.level]
		if l.data["stream"] != stream {
			t.Errorf("log at %s for stream %v", l.level, l.data["stream"])
		}
		lines[l.level] = append(lines[l.level], strings.Split(l.data["text"].(string), "\n")...)
	}
	if got := strings.Join(lines[protocol.LevelInfo], "|"); got != "out 1|out 2|out 3|out 4|out 5|no newline" {
		t.Errorf("stdout lines %q", got)
	}
	if got := strings.Join(lines[protocol.LevelWarning], "|"); got != "err 1|err 2|err 3|err 4|err 5" {
		t.Errorf("stderr lines %q", got)
	}
}

// A flood of lines is streamed in bounded batches, full batches as soon
// as they fill: every line arrives, none is dropped.
func TestStreamingAFlood(t *testing.T) {
	t.Parallel()
	def := shDef(`yes | head -n 2000000`)
	def.Streaming = true
	tl := newTool(t, def, "")
	rec := &recorder{}
	start := time.Now()
	callText(t, tl, nil, &tools.Request{Reporter: rec, WantsProgress: true})
	elapsed := time.Since(start)

	rec.mu.Lock()
	defer rec.mu.Unlock()
	// 2,000,000 lines of 2 bytes fill at most 4e6/64Ki full batches; the
	// rest go at most every 100 ms.
	if max := int(elapsed/(100*time.Millisecond)) + 2 + 4_000_000/(64<<10) + 1; len(rec.progress) > max {
		t.Errorf("%d progress notifications in %s, want at most %d", len(rec.progress), elapsed, max)
	}
	if last := rec.progress[len(rec.progress)-1]; last.done != 2_000_000 {
		t.Errorf("last progress counts %v lines, want 2000000", last.done)
	}
	dropped, kept := 0, 0
	for _, l := range rec.logs {
		if n, ok := l.data["droppedLines"].(int); ok {
			dropped += n
		}
		text := l.data["text"].(string)
		if len(text) > 2*64<<10+1000 {
			t.Errorf("one log message carries %d bytes", len(text))
		}
		if text != "" { // "" when every line of the batch was dropped
			kept += strings.Count(text, "\n") + 1
		}
	}
	if dropped != 0 || kept != 2_000_000 {
		t.Errorf("%d lines logged and %d dropped, want all 2000000 logged", kept, dropped)
	}
}

// Long lines are cut in the stream, not in the result.
func TestStreamingCutsLongLines(t *testing.T) {
	t.Parallel()
	def := shDef(`head -c 10000 /dev/zero | tr '\0' a; echo; echo short`)
	def.Streaming = true
	tl := newTool(t, def, "")
	rec := &recorder{}
	out := callText(t, tl, nil, &tools.Request{Reporter: rec, WantsProgress: true})
	if len(out) != 10000+1+6 {
		t.Fatalf("result of %d bytes", len(out))
	}
	rec.mu.Lock()
	defer rec.mu.Unlock()
	var all []string
	for _, l := range rec.logs {
		all = append(all, strings.Split(l.data["text"].(string), "\n")...)
	}
	if len(all) != 2 || len(all[0]) != 4096+len(" [line cut]") || !strings.HasSuffix(all[0], "a [line cut]") || all[1] != "short" {
		t.Fatalf("streamed lines of %d bytes: %q", len(all[0]), all)
	}
}

// Without Streaming nothing is reported, even to a listener.
func TestNoStreamingByDefault(t *testing.T) {
	t.Parallel()
	tl := newTool(t, shDef(`echo one; echo two >&2`), "")
	rec := &recorder{}
	callText(t, tl, nil, &tools.Request{Reporter: rec, WantsProgress: true})
	if len(rec.progress)+len(rec.logs) != 0 {
		t.Fatalf("reported %+v %+v", rec.progress, rec.logs)
	}
	// A streaming tool streams only when the client asked for progress.
	def := shDef(`echo one; echo two >&2`)
	def.Streaming = true
	callText(t, newTool(t, def, ""), nil, &tools.Request{Reporter: rec})
	if len(rec.progress)+len(rec.logs) != 0 {
		t.Fatalf("reported without a progress token: %+v %+v", rec.progress, rec.logs)
	}
}

// codexResultBytes is about what Codex 0.169.0 keeps of one tool result
// (e2e/codex_output_test.go measures it): it keeps the head and the tail
// of the text and drops later content blocks, resource_links too.
const codexResultBytes = 12000

// A large output's result, and a failed run's error, say first where the
// whole output is, and with the default limits fit what Codex keeps.
func TestLargeOutputPointsFirst(t *testing.T) {
	t.Parallel()
	store := spool.NewStore(t.TempDir(), spool.Limits{})
	defer store.Close()
	run := func(id, script string) (*protocol.CallToolResult, error) {
		out, err := store.Create(id)
		if err != nil {
			t.Fatal(err)
		}
		defer out.Close()
		return call(testCtx(t, 30*time.Second), t, newTool(t, shDef(script), ""), nil, &tools.Request{Output: out})
	}

	res, err := run("ok", `seq 100000`)
	if err != nil {
		t.Fatal(err)
	}
	text := res.Content[0].Text
	if !strings.HasPrefix(text, "[stdout: 588895 bytes; this shows the first 2048 and the last 2048 bytes; the whole stdout is at troupe://output/ok/stdout: ") ||
		!strings.HasSuffix(text, "99999\n100000\n") {
		t.Fatalf("result text: %.300q ... %q", text, text[max(0, len(text)-40):])
	}
	if len(text) > codexResultBytes/2 {
		t.Errorf("the result shows %d bytes of stdout; with the resource_link it must fit in %d", len(text), codexResultBytes)
	}

	_, err = run("fail", `seq 100000; seq 100000 >&2; exit 3`)
	te := wantToolError(t, err, command.KindCommandFailed)
	head, _, _ := strings.Cut(te.Message, "...")
	if !strings.Contains(head, "the whole stdout is at troupe://output/fail/stdout") {
		t.Errorf("the error does not say first where stdout is:\n%.600s", te.Message)
	}
	if !strings.Contains(te.Message, "the whole stderr is at troupe://output/fail/stderr") || len(te.Message) > codexResultBytes*3/4 {
		t.Errorf("error of %d bytes:\n%s", len(te.Message), te.Message)
	}
}
