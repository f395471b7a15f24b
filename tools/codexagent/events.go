package codexagent

import (
	"encoding/base64"
	"encoding/json"
	"strings"
)

// legacyEvent translates one app-server v2 notification (or approval
// request) into the EventMsg the old Codex MCP servers (0.42
// `codex mcp serve`, 0.153 `codex mcp-server`) sent as the msg of a
// codex/event notification, so a client written against either keeps
// reading the events it knows. eventType is msg["type"]; ok is false for
// notifications the old servers had no event for (and for unreadable
// params).
//
// The payloads are the ones both releases were recorded sending (see
// events_test.go): where they agree the fields are the same, where 0.153
// added fields (turn_id, thread_id, phase, status, ...) they are present
// too, which a 0.42 client ignores. Where the two conflict, 0.153 wins:
// patch changes are {"type": "add", "content": ...} (0.42 wrote
// {"add": {"content": ...}}). Deliberate differences from both:
// session_configured carries no rollout_path (a host path under
// CODEX_HOME that the client has no use for), and fields app-server no
// longer reports (history_log_id, stderr apart from stdout) are zero
// rather than invented.
func legacyEvent(method string, params json.RawMessage) (eventType string, msg map[string]any, ok bool) {
	var p map[string]any
	if len(params) > 0 {
		if err := json.Unmarshal(params, &p); err != nil {
			return "", nil, false
		}
	}
	if p == nil {
		p = map[string]any{}
	}
	var typ string
	var m map[string]any
	switch method {
	case "thread/started":
		typ, m = evSessionConfigured(evObj(p, "thread"))
	case "turn/started":
		turn := evObj(p, "turn")
		typ, m = "task_started", map[string]any{"turn_id": evStr(turn, "id"), "started_at": turn["startedAt"],
			"model_context_window": nil, "collaboration_mode_kind": "default"}
	case "turn/completed":
		typ, m = evTurnCompleted(evObj(p, "turn"))
	case "error":
		e := evObj(p, "error")
		if b, _ := p["willRetry"].(bool); b {
			typ, m = "stream_error", map[string]any{"message": evStr(e, "message")}
		} else {
			typ, m = "error", map[string]any{"message": evStr(e, "message")}
		}
	case "warning":
		typ, m = "warning", map[string]any{"message": evStr(p, "message")}
	case "item/agentMessage/delta":
		typ, m = "agent_message_delta", map[string]any{"delta": evStr(p, "delta")}
	case "item/reasoning/summaryTextDelta":
		typ, m = "agent_reasoning_delta", map[string]any{"delta": evStr(p, "delta")}
	case "item/reasoning/textDelta":
		typ, m = "agent_reasoning_raw_content_delta", map[string]any{"delta": evStr(p, "delta")}
	case "item/reasoning/summaryPartAdded":
		typ, m = "agent_reasoning_section_break", map[string]any{}
	case "item/commandExecution/outputDelta":
		// The old chunk was the raw bytes, base64 (serde_bytes); app-server
		// sends the decoded text.
		typ, m = "exec_command_output_delta", map[string]any{"call_id": evStr(p, "itemId"), "stream": "stdout",
			"chunk": base64.StdEncoding.EncodeToString([]byte(evStr(p, "delta")))}
	case "item/started":
		typ, m = evItemStarted(evObj(p, "item"), evStr(p, "turnId"))
	case "item/completed":
		typ, m = evItemCompleted(evObj(p, "item"), evStr(p, "turnId"))
	case "item/commandExecution/requestApproval":
		cmd := evStr(p, "command")
		typ, m = "exec_approval_request", map[string]any{"call_id": evStr(p, "itemId"), "turn_id": evStr(p, "turnId"),
			"command": evSplitCommand(cmd), "cwd": evStr(p, "cwd"), "reason": p["reason"],
			"parsed_cmd": evParsedCmd(p["commandActions"], cmd)}
	case "item/fileChange/requestApproval":
		typ, m = "apply_patch_approval_request", map[string]any{"call_id": evStr(p, "itemId"), "turn_id": evStr(p, "turnId"),
			"changes": map[string]any{}, "reason": p["reason"], "grant_root": p["grantRoot"]}
	case "thread/tokenUsage/updated":
		u := evObj(p, "tokenUsage")
		typ, m = "token_count", map[string]any{
			"info": map[string]any{
				"total_token_usage":    evTokenUsage(evObj(u, "total")),
				"last_token_usage":     evTokenUsage(evObj(u, "last")),
				"model_context_window": u["modelContextWindow"],
			},
			"rate_limits": map[string]any{"primary": nil, "secondary": nil},
		}
	case "turn/diff/updated":
		typ, m = "turn_diff", map[string]any{"unified_diff": evStr(p, "diff")}
	case "turn/plan/updated":
		plan := []any{}
		steps, _ := p["plan"].([]any)
		for _, s := range steps {
			st, _ := s.(map[string]any)
			plan = append(plan, map[string]any{"step": evStr(st, "step"), "status": evSnake(evStr(st, "status"))})
		}
		typ, m = "plan_update", map[string]any{"explanation": p["explanation"], "plan": plan}
	case "thread/compacted":
		typ, m = "context_compacted", map[string]any{}
	}
	if typ == "" {
		return "", nil, false
	}
	m["type"] = typ
	return typ, m, true
}

// evSessionConfigured is the old first event of a session, from the thread
// app-server started.
func evSessionConfigured(th map[string]any) (string, map[string]any) {
	if th == nil || evStr(th, "id") == "" {
		return "", nil
	}
	return "session_configured", map[string]any{
		"session_id":          evStr(th, "id"),
		"thread_id":           evStr(th, "id"),
		"model":               evStr(th, "model"),
		"model_provider_id":   evStr(th, "modelProvider"),
		"reasoning_effort":    th["reasoningEffort"],
		"cwd":                 evStr(th, "cwd"),
		"history_log_id":      0,
		"history_entry_count": 0,
	}
}

// evTurnCompleted is the old end of a task: task_complete, turn_aborted or
// error. last_agent_message comes from the turn's items when app-server
// included them; the caller, which saw the items go by, may fill it in.
func evTurnCompleted(turn map[string]any) (string, map[string]any) {
	if turn == nil {
		return "", nil
	}
	id := evStr(turn, "id")
	switch evStr(turn, "status") {
	case "completed":
		var last any
		items, _ := turn["items"].([]any)
		for _, it := range items {
			if item, _ := it.(map[string]any); evStr(item, "type") == "agentMessage" {
				last = evStr(item, "text")
			}
		}
		return "task_complete", map[string]any{"turn_id": id, "last_agent_message": last,
			"started_at": turn["startedAt"], "completed_at": turn["completedAt"], "duration_ms": turn["durationMs"],
			"time_to_first_token_ms": nil}
	case "interrupted":
		return "turn_aborted", map[string]any{"turn_id": id, "reason": "interrupted"}
	case "failed":
		msg := evStr(evObj(turn, "error"), "message")
		if msg == "" {
			msg = "the turn failed"
		}
		return "error", map[string]any{"message": msg}
	}
	return "", nil
}

// evItemStarted is the old begin event of an item, for the kinds that had
// one.
func evItemStarted(item map[string]any, turnID string) (string, map[string]any) {
	id := evStr(item, "id")
	switch evStr(item, "type") {
	case "commandExecution":
		cmd := evStr(item, "command")
		return "exec_command_begin", map[string]any{"call_id": id, "turn_id": turnID,
			"command": evSplitCommand(cmd), "cwd": evStr(item, "cwd"), "parsed_cmd": evParsedCmd(item["commandActions"], cmd)}
	case "fileChange":
		return "patch_apply_begin", map[string]any{"call_id": id, "turn_id": turnID,
			"auto_approved": false, "changes": evFileChanges(item["changes"])}
	case "mcpToolCall":
		return "mcp_tool_call_begin", map[string]any{"call_id": id, "invocation": evInvocation(item)}
	case "webSearch":
		return "web_search_begin", map[string]any{"call_id": id}
	}
	return "", nil
}

// evItemCompleted is the old event of a finished item.
func evItemCompleted(item map[string]any, turnID string) (string, map[string]any) {
	id := evStr(item, "id")
	switch evStr(item, "type") {
	case "agentMessage":
		return "agent_message", map[string]any{"message": evStr(item, "text"), "phase": item["phase"], "memory_citation": nil}
	case "userMessage":
		var texts []string
		content, _ := item["content"].([]any)
		for _, c := range content {
			if in, _ := c.(map[string]any); evStr(in, "type") == "text" {
				texts = append(texts, evStr(in, "text"))
			}
		}
		return "user_message", map[string]any{"message": strings.Join(texts, "\n"), "images": []any{},
			"local_images": []any{}, "audio": []any{}, "local_audio": []any{}, "text_elements": []any{}}
	case "reasoning":
		summary, _ := item["summary"].([]any)
		var parts []string
		for _, s := range summary {
			if t, ok := s.(string); ok {
				parts = append(parts, t)
			}
		}
		if len(parts) == 0 {
			return "", nil
		}
		return "agent_reasoning", map[string]any{"text": strings.Join(parts, "\n\n")}
	case "commandExecution":
		cmd := evStr(item, "command")
		out := evStr(item, "aggregatedOutput")
		exit := item["exitCode"]
		if exit == nil {
			exit = -1
		}
		return "exec_command_end", map[string]any{"call_id": id, "turn_id": turnID,
			"command": evSplitCommand(cmd), "cwd": evStr(item, "cwd"), "parsed_cmd": evParsedCmd(item["commandActions"], cmd),
			"stdout": out, "stderr": "", "aggregated_output": out, "exit_code": exit,
			"duration": evDuration(item["durationMs"]), "formatted_output": out, "status": evSnake(evStr(item, "status"))}
	case "fileChange":
		return "patch_apply_end", map[string]any{"call_id": id, "turn_id": turnID, "stdout": "", "stderr": "",
			"success": evStr(item, "status") == "completed", "changes": evFileChanges(item["changes"]),
			"status": evSnake(evStr(item, "status"))}
	case "mcpToolCall":
		var res any
		if e := evObj(item, "error"); e != nil {
			res = map[string]any{"Err": evStr(e, "message")}
		} else if r := evObj(item, "result"); r != nil {
			ok := map[string]any{"content": r["content"]}
			if sc, has := r["structuredContent"]; has && sc != nil {
				ok["structuredContent"] = sc
			}
			res = map[string]any{"Ok": ok}
		}
		return "mcp_tool_call_end", map[string]any{
			"call_id": id, "invocation": evInvocation(item), "duration": evDuration(item["durationMs"]), "result": res}
	case "webSearch":
		return "web_search_end", map[string]any{"call_id": id, "query": evStr(item, "query")}
	}
	return "", nil
}

// evParsedCmd is the old parsed_cmd list from app-server's commandActions
// ({"type": "unknown", "command": ...} -> {"type": "unknown", "cmd": ...});
// without actions, the whole command as one unknown.
func evParsedCmd(v any, cmd string) []any {
	out := []any{}
	list, _ := v.([]any)
	for _, a := range list {
		act, _ := a.(map[string]any)
		if act == nil {
			continue
		}
		pc := map[string]any{"type": evSnake(evStr(act, "type")), "cmd": evStr(act, "command")}
		for _, k := range []string{"name", "path", "query"} {
			if v, ok := act[k]; ok {
				pc[k] = v
			}
		}
		out = append(out, pc)
	}
	if len(out) == 0 && cmd != "" {
		out = append(out, map[string]any{"type": "unknown", "cmd": cmd})
	}
	return out
}

// evInvocation is the old McpInvocation of an mcpToolCall item.
func evInvocation(item map[string]any) map[string]any {
	return map[string]any{"server": evStr(item, "server"), "tool": evStr(item, "tool"), "arguments": item["arguments"]}
}

// evFileChanges is the old changes map, path -> {"type": "add"|"delete",
// "content"} or {"type": "update", "unified_diff", "move_path"} (0.153's
// form), from app-server's list of FileUpdateChange.
func evFileChanges(v any) map[string]any {
	out := map[string]any{}
	list, _ := v.([]any)
	for _, c := range list {
		ch, _ := c.(map[string]any)
		path := evStr(ch, "path")
		if path == "" {
			continue
		}
		kind := evObj(ch, "kind")
		diff := evStr(ch, "diff")
		switch t := evStr(kind, "type"); t {
		case "add", "delete":
			out[path] = map[string]any{"type": t, "content": diff}
		default:
			out[path] = map[string]any{"type": "update", "unified_diff": diff, "move_path": kind["move_path"]}
		}
	}
	return out
}

// evTokenUsage is the old TokenUsage from app-server's TokenUsageBreakdown.
func evTokenUsage(b map[string]any) map[string]any {
	if b == nil {
		return nil
	}
	num := func(k string) any {
		if v, ok := b[k].(float64); ok {
			return int64(v)
		}
		return 0
	}
	return map[string]any{
		"input_tokens":            num("inputTokens"),
		"cached_input_tokens":     num("cachedInputTokens"),
		"output_tokens":           num("outputTokens"),
		"reasoning_output_tokens": num("reasoningOutputTokens"),
		"total_tokens":            num("totalTokens"),
	}
}

// evDuration is a Rust std Duration as serde writes it, {secs, nanos},
// from milliseconds.
func evDuration(ms any) map[string]any {
	f, _ := ms.(float64)
	total := int64(f)
	return map[string]any{"secs": total / 1000, "nanos": (total % 1000) * 1_000_000}
}

// evSplitCommand turns app-server's shell-quoted command line back into the
// argv the old events carried, undoing POSIX shell quoting (single and
// double quotes, backslashes); an unbalanced quote keeps the line whole.
func evSplitCommand(s string) []string {
	var args []string
	var cur strings.Builder
	inArg := false
	var quote rune
	escaped := false
	for _, r := range s {
		switch {
		case escaped:
			cur.WriteRune(r)
			escaped = false
		case quote == '\'':
			if r == '\'' {
				quote = 0
			} else {
				cur.WriteRune(r)
			}
		case quote == '"':
			switch r {
			case '"':
				quote = 0
			case '\\':
				escaped = true
			default:
				cur.WriteRune(r)
			}
		case r == '\\':
			escaped, inArg = true, true
		case r == '\'' || r == '"':
			quote, inArg = r, true
		case r == ' ' || r == '\t' || r == '\n':
			if inArg {
				args = append(args, cur.String())
				cur.Reset()
				inArg = false
			}
		default:
			cur.WriteRune(r)
			inArg = true
		}
	}
	if quote != 0 || escaped {
		return []string{s}
	}
	if inArg {
		args = append(args, cur.String())
	}
	if args == nil {
		args = []string{}
	}
	return args
}

// evObj is p[k] as an object, nil when it is not one.
func evObj(p map[string]any, k string) map[string]any {
	m, _ := p[k].(map[string]any)
	return m
}

// evStr is p[k] as a string, "" when it is not one.
func evStr(p map[string]any, k string) string {
	s, _ := p[k].(string)
	return s
}

// evSnake turns app-server's camelCase enum values (inProgress) into the
// old snake_case ones (in_progress).
func evSnake(s string) string {
	var b strings.Builder
	for _, r := range s {
		if r >= 'A' && r <= 'Z' {
			b.WriteByte('_')
			r += 'a' - 'A'
		}
		b.WriteRune(r)
	}
	return b.String()
}
