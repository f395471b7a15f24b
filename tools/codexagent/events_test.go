package codexagent

import (
	"encoding/json"
	"reflect"
	"strings"
	"testing"
)

// The inputs below are app-server 0.169 notifications as recorded (ids
// shortened); the wanted events are what Codex 0.153.4's codex mcp-server
// (and, for the fields it had, 0.42.0's codex mcp serve) sent as
// codex/event msg for the same scripted-model turns, with the
// deliberate differences legacyEvent's comment names.
func TestLegacyEvent(t *testing.T) {
	for _, tc := range []struct {
		name, method, params string
		want                 string // the msg as JSON; "" for ok=false
	}{
		{"session configured", "thread/started",
			`{"thread":{"id":"th1","sessionId":"th1","modelProvider":"scripted","model":"scripted","reasoningEffort":null,` +
				`"path":"/home/x/.codex/sessions/rollout.jsonl","cwd":"/ws","cliVersion":"0.169.0","turns":[]}}`,
			`{"type":"session_configured","session_id":"th1","thread_id":"th1","model":"scripted","model_provider_id":"scripted",` +
				`"reasoning_effort":null,"cwd":"/ws","history_log_id":0,"history_entry_count":0}`},
		{"task started", "turn/started",
			`{"threadId":"th1","turn":{"id":"tu1","items":[],"status":"inProgress","error":null,"startedAt":1795478824}}`,
			`{"type":"task_started","turn_id":"tu1","started_at":1795478824,"model_context_window":null,"collaboration_mode_kind":"default"}`},
		{"agent message", "item/completed",
			`{"item":{"type":"agentMessage","id":"msg_final","text":"answer one","phase":null},"threadId":"th1","turnId":"tu1"}`,
			`{"type":"agent_message","message":"answer one","phase":null,"memory_citation":null}`},
		{"agent message delta", "item/agentMessage/delta",
			`{"threadId":"th1","turnId":"tu1","itemId":"msg","delta":"ans"}`,
			`{"type":"agent_message_delta","delta":"ans"}`},
		{"user message", "item/completed",
			`{"item":{"type":"userMessage","id":"u1","content":[{"type":"text","text":"hello","text_elements":[]}]},"turnId":"tu1"}`,
			`{"type":"user_message","message":"hello","images":[],"local_images":[],"audio":[],"local_audio":[],"text_elements":[]}`},
		{"reasoning", "item/completed",
			`{"item":{"type":"reasoning","id":"r1","summary":["first","second"],"content":[]},"turnId":"tu1"}`,
			`{"type":"agent_reasoning","text":"first\n\nsecond"}`},
		{"reasoning without summary", "item/completed",
			`{"item":{"type":"reasoning","id":"r1","summary":[],"content":[]},"turnId":"tu1"}`, ""},
		{"exec begin", "item/started",
			`{"item":{"type":"commandExecution","id":"call_1","command":"/bin/bash -lc 'echo hi there'","cwd":"/ws",` +
				`"status":"inProgress","commandActions":[{"type":"unknown","command":"echo hi there"}],"aggregatedOutput":null,` +
				`"exitCode":null,"durationMs":null},"threadId":"th1","turnId":"tu1"}`,
			`{"type":"exec_command_begin","call_id":"call_1","turn_id":"tu1","command":["/bin/bash","-lc","echo hi there"],` +
				`"cwd":"/ws","parsed_cmd":[{"type":"unknown","cmd":"echo hi there"}]}`},
		{"exec end", "item/completed",
			`{"item":{"type":"commandExecution","id":"call_1","command":"/bin/bash -lc 'echo hi there'","cwd":"/ws",` +
				`"status":"completed","commandActions":[{"type":"listFiles","command":"ls","path":null}],` +
				`"aggregatedOutput":"hi there\n","exitCode":0,"durationMs":1250},"threadId":"th1","turnId":"tu1"}`,
			`{"type":"exec_command_end","call_id":"call_1","turn_id":"tu1","command":["/bin/bash","-lc","echo hi there"],` +
				`"cwd":"/ws","parsed_cmd":[{"type":"list_files","cmd":"ls","path":null}],"stdout":"hi there\n","stderr":"",` +
				`"aggregated_output":"hi there\n","exit_code":0,"duration":{"secs":1,"nanos":250000000},` +
				`"formatted_output":"hi there\n","status":"completed"}`},
		{"exec declined", "item/completed",
			`{"item":{"type":"commandExecution","id":"call_1","command":"rm -rf x","cwd":"/ws","status":"declined",` +
				`"commandActions":[],"aggregatedOutput":null,"exitCode":null,"durationMs":null},"turnId":"tu1"}`,
			`{"type":"exec_command_end","call_id":"call_1","turn_id":"tu1","command":["rm","-rf","x"],"cwd":"/ws",` +
				`"parsed_cmd":[{"type":"unknown","cmd":"rm -rf x"}],"stdout":"","stderr":"","aggregated_output":"",` +
				`"exit_code":-1,"duration":{"secs":0,"nanos":0},"formatted_output":"","status":"declined"}`},
		{"exec output delta", "item/commandExecution/outputDelta",
			`{"threadId":"th1","turnId":"tu1","itemId":"call_1","delta":"hi there\n"}`,
			`{"type":"exec_command_output_delta","call_id":"call_1","stream":"stdout","chunk":"aGkgdGhlcmUK"}`},
		{"patch begin", "item/started",
			`{"item":{"type":"fileChange","id":"call_1","changes":[{"path":"/ws/new.txt","kind":{"type":"add"},"diff":"hello\n"},` +
				`{"path":"/ws/old.txt","kind":{"type":"update","move_path":null},"diff":"@@ -1 +1 @@\n-a\n+b\n"}],` +
				`"status":"inProgress"},"threadId":"th1","turnId":"tu1"}`,
			`{"type":"patch_apply_begin","call_id":"call_1","turn_id":"tu1","auto_approved":false,"changes":{` +
				`"/ws/new.txt":{"type":"add","content":"hello\n"},` +
				`"/ws/old.txt":{"type":"update","unified_diff":"@@ -1 +1 @@\n-a\n+b\n","move_path":null}}}`},
		{"patch end", "item/completed",
			`{"item":{"type":"fileChange","id":"call_1","changes":[{"path":"/ws/gone.txt","kind":{"type":"delete"},"diff":"x\n"}],` +
				`"status":"completed"},"threadId":"th1","turnId":"tu1"}`,
			`{"type":"patch_apply_end","call_id":"call_1","turn_id":"tu1","stdout":"","stderr":"","success":true,` +
				`"changes":{"/ws/gone.txt":{"type":"delete","content":"x\n"}},"status":"completed"}`},
		{"mcp tool call", "item/completed",
			`{"item":{"type":"mcpToolCall","id":"c2","server":"docs","tool":"search","status":"completed","arguments":{"q":"x"},` +
				`"result":{"content":[{"type":"text","text":"hit"}],"structuredContent":null,"_meta":null},"error":null,"durationMs":5},"turnId":"tu1"}`,
			`{"type":"mcp_tool_call_end","call_id":"c2","invocation":{"server":"docs","tool":"search","arguments":{"q":"x"}},` +
				`"duration":{"secs":0,"nanos":5000000},"result":{"Ok":{"content":[{"type":"text","text":"hit"}]}}}`},
		{"web search", "item/started",
			`{"item":{"type":"webSearch","id":"ws1","query":"go","action":null,"results":null},"turnId":"tu1"}`,
			`{"type":"web_search_begin","call_id":"ws1"}`},
		{"token count", "thread/tokenUsage/updated",
			`{"threadId":"th1","turnId":"tu1","tokenUsage":{"total":{"totalTokens":10,"inputTokens":6,"cachedInputTokens":2,` +
				`"cacheWriteInputTokens":0,"outputTokens":4,"reasoningOutputTokens":0},"last":{"totalTokens":5,"inputTokens":3,` +
				`"cachedInputTokens":1,"cacheWriteInputTokens":0,"outputTokens":2,"reasoningOutputTokens":0},"modelContextWindow":258400}}`,
			`{"type":"token_count","info":{"total_token_usage":{"input_tokens":6,"cached_input_tokens":2,"output_tokens":4,` +
				`"reasoning_output_tokens":0,"total_tokens":10},"last_token_usage":{"input_tokens":3,"cached_input_tokens":1,` +
				`"output_tokens":2,"reasoning_output_tokens":0,"total_tokens":5},"model_context_window":258400},` +
				`"rate_limits":{"primary":null,"secondary":null}}`},
		{"task complete", "turn/completed",
			`{"threadId":"th1","turn":{"id":"tu1","items":[{"type":"agentMessage","id":"m1","text":"first"},` +
				`{"type":"agentMessage","id":"m2","text":"answer one"}],"status":"completed","error":null,` +
				`"startedAt":1795478824,"completedAt":1795478825,"durationMs":68}}`,
			`{"type":"task_complete","turn_id":"tu1","last_agent_message":"answer one","started_at":1795478824,` +
				`"completed_at":1795478825,"duration_ms":68,"time_to_first_token_ms":null}`},
		{"task complete without items", "turn/completed",
			`{"threadId":"th1","turn":{"id":"tu1","items":[],"status":"completed","error":null}}`,
			`{"type":"task_complete","turn_id":"tu1","last_agent_message":null,"started_at":null,"completed_at":null,"duration_ms":null,"time_to_first_token_ms":null}`},
		{"turn aborted", "turn/completed",
			`{"threadId":"th1","turn":{"id":"tu1","items":[],"status":"interrupted","error":null}}`,
			`{"type":"turn_aborted","turn_id":"tu1","reason":"interrupted"}`},
		{"turn failed", "turn/completed",
			`{"threadId":"th1","turn":{"id":"tu1","items":[],"status":"failed","error":{"message":"quota exceeded"}}}`,
			`{"type":"error","message":"quota exceeded"}`},
		{"error", "error",
			`{"error":{"message":"stream disconnected","codexErrorInfo":null},"willRetry":false,"threadId":"th1","turnId":"tu1"}`,
			`{"type":"error","message":"stream disconnected"}`},
		{"retried error", "error",
			`{"error":{"message":"reconnecting 1/5"},"willRetry":true,"threadId":"th1","turnId":"tu1"}`,
			`{"type":"stream_error","message":"reconnecting 1/5"}`},
		{"warning", "warning",
			`{"threadId":"th1","message":"Model metadata for scripted not found."}`,
			`{"type":"warning","message":"Model metadata for scripted not found."}`},
		{"turn diff", "turn/diff/updated",
			`{"threadId":"th1","turnId":"tu1","diff":"diff --git a/new.txt b/new.txt\n"}`,
			`{"type":"turn_diff","unified_diff":"diff --git a/new.txt b/new.txt\n"}`},
		{"plan", "turn/plan/updated",
			`{"threadId":"th1","turnId":"tu1","explanation":null,"plan":[{"step":"read","status":"completed"},{"step":"fix","status":"inProgress"}]}`,
			`{"type":"plan_update","explanation":null,"plan":[{"step":"read","status":"completed"},{"step":"fix","status":"in_progress"}]}`},
		{"exec approval", "item/commandExecution/requestApproval",
			`{"kind":"command","threadId":"th1","turnId":"tu1","itemId":"call_1","reason":"need to write",` +
				`"command":"/bin/bash -lc 'touch asked.txt'","cwd":"/ws","commandActions":[{"type":"unknown","command":"touch asked.txt"}]}`,
			`{"type":"exec_approval_request","call_id":"call_1","turn_id":"tu1","command":["/bin/bash","-lc","touch asked.txt"],` +
				`"cwd":"/ws","reason":"need to write","parsed_cmd":[{"type":"unknown","cmd":"touch asked.txt"}]}`},
		{"patch approval", "item/fileChange/requestApproval",
			`{"threadId":"th1","turnId":"tu1","itemId":"call_2","reason":null,"grantRoot":"/ws"}`,
			`{"type":"apply_patch_approval_request","call_id":"call_2","turn_id":"tu1","changes":{},"reason":null,"grant_root":"/ws"}`},
		// What the old servers had no event for.
		{"user message start", "item/started",
			`{"item":{"type":"userMessage","id":"u1","content":[]},"turnId":"tu1"}`, ""},
		{"status", "thread/status/changed", `{"threadId":"th1","status":{"type":"idle"}}`, ""},
		{"rate limits", "account/rateLimits/updated", `{"rateLimits":{"limitId":"codex"}}`, ""},
		{"resolved", "serverRequest/resolved", `{"threadId":"th1","requestId":0}`, ""},
		{"unknown turn status", "turn/completed", `{"turn":{"id":"tu1","status":"inProgress"}}`, ""},
		{"thread without id", "thread/started", `{"thread":{}}`, ""},
		{"unreadable", "item/completed", `[1,2]`, ""},
		{"no params", "turn/started", ``, `{"type":"task_started","turn_id":"","started_at":null,"model_context_window":null,"collaboration_mode_kind":"default"}`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			typ, msg, ok := legacyEvent(tc.method, json.RawMessage(tc.params))
			if tc.want == "" {
				if ok {
					t.Fatalf("legacyEvent = %s %v, want none", typ, msg)
				}
				return
			}
			if !ok {
				t.Fatal("legacyEvent found no event")
			}
			if typ != msg["type"] {
				t.Errorf("eventType %q, msg type %v", typ, msg["type"])
			}
			b, err := json.Marshal(msg)
			if err != nil {
				t.Fatal(err)
			}
			var got, want any
			if err := json.Unmarshal(b, &got); err != nil {
				t.Fatal(err)
			}
			if err := json.Unmarshal([]byte(tc.want), &want); err != nil {
				t.Fatalf("bad want: %v", err)
			}
			if !reflect.DeepEqual(got, want) {
				t.Errorf("msg\n got %s\nwant %s", b, tc.want)
			}
		})
	}
}

// TestLegacyEventKeepsOldFields checks the fields each release's clients
// read (recorded from 0.42.0 and 0.153.4 for the same turns) are all
// present, whatever else the event carries.
func TestLegacyEventKeepsOldFields(t *testing.T) {
	fields := map[string][]string{
		// 0.42.0 (rollout_path left out on purpose) and 0.153.4.
		"session_configured": {"session_id", "model", "history_log_id", "history_entry_count", "thread_id", "model_provider_id", "cwd"},
		"task_started":       {"model_context_window", "turn_id", "started_at", "collaboration_mode_kind"},
		"agent_message":      {"message", "phase", "memory_citation"},
		"exec_command_begin": {"call_id", "command", "cwd", "parsed_cmd", "turn_id"},
		"exec_command_end": {"call_id", "stdout", "stderr", "aggregated_output", "exit_code", "duration", "formatted_output",
			"turn_id", "command", "cwd", "parsed_cmd", "status"},
		"patch_apply_begin": {"call_id", "auto_approved", "changes", "turn_id"},
		"patch_apply_end":   {"call_id", "stdout", "stderr", "success", "turn_id", "changes", "status"},
		"token_count":       {"info", "rate_limits"},
		"task_complete":     {"last_agent_message", "turn_id", "started_at", "completed_at", "duration_ms"},
		"turn_diff":         {"unified_diff"},
		"user_message":      {"message", "images"},
	}
	inputs := []struct{ method, params string }{
		{"thread/started", `{"thread":{"id":"th1"}}`},
		{"turn/started", `{"turn":{"id":"tu1"}}`},
		{"item/completed", `{"item":{"type":"agentMessage","id":"m","text":"x"}}`},
		{"item/started", `{"item":{"type":"commandExecution","id":"c","command":"ls"}}`},
		{"item/completed", `{"item":{"type":"commandExecution","id":"c","command":"ls"}}`},
		{"item/started", `{"item":{"type":"fileChange","id":"c","changes":[]}}`},
		{"item/completed", `{"item":{"type":"fileChange","id":"c","changes":[]}}`},
		{"thread/tokenUsage/updated", `{"tokenUsage":{"total":{},"last":{}}}`},
		{"turn/completed", `{"turn":{"id":"tu1","status":"completed"}}`},
		{"turn/diff/updated", `{"diff":""}`},
		{"item/completed", `{"item":{"type":"userMessage","id":"u","content":[]}}`},
	}
	seen := map[string]bool{}
	for _, in := range inputs {
		typ, msg, ok := legacyEvent(in.method, json.RawMessage(in.params))
		if !ok {
			t.Errorf("%s %s: no event", in.method, in.params)
			continue
		}
		seen[typ] = true
		for _, f := range fields[typ] {
			if _, has := msg[f]; !has {
				t.Errorf("%s lacks %s: %v", typ, f, msg)
			}
		}
	}
	for typ := range fields {
		if !seen[typ] {
			t.Errorf("no input produced %s", typ)
		}
	}
}

func TestSplitCommand(t *testing.T) {
	for in, want := range map[string][]string{
		"/bin/bash -lc 'echo hi there'":        {"/bin/bash", "-lc", "echo hi there"},
		`ls -la "my dir" a\ b`:                 {"ls", "-la", "my dir", "a b"},
		`echo 'it'\''s' "say \"hi\""`:          {"echo", "it's", `say "hi"`},
		"  spaced   out  ":                     {"spaced", "out"},
		"echo ''":                              {"echo", ""},
		"unbalanced 'quote":                    {"unbalanced 'quote"},
		"":                                     {},
		"apply_patch <<'EOF'\n*** Begin Patch": {"apply_patch", "<<EOF", "***", "Begin", "Patch"},
	} {
		if got := evSplitCommand(in); !reflect.DeepEqual(got, want) {
			t.Errorf("evSplitCommand(%q) = %q, want %q", in, got, want)
		}
	}
}

func TestEventTurnID(t *testing.T) {
	for in, want := range map[string]string{
		`{"turnId":"a"}`:            "a",
		`{"turn":{"id":"b"}}`:       "b",
		`{"thread":{"id":"c"}}`:     "",
		`not json`:                  "",
		`{"turnId":"","turn":null}`: "",
	} {
		if got := eventTurnID(json.RawMessage(in)); got != want {
			t.Errorf("eventTurnID(%s) = %q, want %q", in, got, want)
		}
	}
}

func TestSnake(t *testing.T) {
	for in, want := range map[string]string{"inProgress": "in_progress", "listFiles": "list_files", "done": "done", "": ""} {
		if got := evSnake(in); got != want {
			t.Errorf("evSnake(%q) = %q", in, got)
		}
	}
	if strings.Contains(evSnake("ABC"), "__") {
		t.Error("evSnake doubles underscores")
	}
}
