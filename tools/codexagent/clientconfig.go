package codexagent

import (
	"fmt"
	"sort"
	"strings"

	"troupe/tools"
)

// What a client may set of Codex's configuration.
//
// The codex tool's config argument, newConversation's config and
// resumeConversation's overrides reach Codex as thread/start config
// overrides, which Codex applies like -c key=value: over every layer of
// its configuration. Much of that configuration names programs Codex
// starts (mcp_servers.*, notify, hooks, zsh_path, …), widens its sandbox
// (sandbox_mode, sandbox_workspace_write.*), trusts a project (whose own
// .codex/config.toml then names programs), reads files outside the
// workspace into the model's context (model_instructions_file), or sends
// the operator's credentials elsewhere (model_providers.*.base_url with
// an env_key, chatgpt_base_url, otel exporters). A client is not the
// operator, so it gets an allow-list, not a list of bad keys: the keys
// below choose how the model works and nothing else, and a key Codex adds
// later is refused until it is judged. The sandbox is chosen with the
// sandbox argument, which troupe confines (see confine).

// clientConfigKeys are the dotted configuration keys a client may set.
var clientConfigKeys = map[string]bool{
	"model":                              true,
	"model_provider":                     true, // one of the operator's providers; defining one is refused
	"review_model":                       true,
	"model_reasoning_effort":             true,
	"model_reasoning_summary":            true,
	"model_verbosity":                    true,
	"model_supports_reasoning_summaries": true,
	"model_context_window":               true,
	"model_auto_compact_token_limit":     true,
	"plan_mode_reasoning_effort":         true,
	"approval_policy":                    true, // who is asked; the sandbox still holds
	"base_instructions":                  true,
	"developer_instructions":             true,
	"compact_prompt":                     true,
	"include_plan_tool":                  true,
	"include_apply_patch_tool":           true,
	"include_view_image_tool":            true,
	"hide_agent_reasoning":               true,
	"show_raw_agent_reasoning":           true,
	"web_search":                         true,
	"tools.web_search":                   true,
	"tools.view_image":                   true,
	"personality":                        true,
	"service_tier":                       true,
}

// checkClientConfig refuses a client's configuration overrides unless
// every key is in clientConfigKeys. what names the argument in the error
// ("codex: config", "newConversation: config").
func checkClientConfig(what string, cfg map[string]any) error {
	var bad []string
	for k, v := range cfg {
		if sub, ok := v.(map[string]any); ok {
			// A table given as a value ({"tools": {"web_search": true}})
			// is the same as its dotted keys.
			flat := map[string]any{}
			flatten(k+".", sub, flat)
			if err := checkClientConfig(what, flat); err != nil {
				return err
			}
			continue
		}
		if !clientConfigKeys[k] {
			bad = append(bad, k)
		}
	}
	if len(bad) == 0 {
		return nil
	}
	sort.Strings(bad)
	allowed := make([]string, 0, len(clientConfigKeys))
	for k := range clientConfigKeys {
		allowed = append(allowed, k)
	}
	sort.Strings(allowed)
	return tools.Errorf(tools.KindPermissionDenied,
		"%s: %s cannot be set by a client (keys that start programs, widen the sandbox, trust a project or "+
			"name files are the operator's, in Codex's config.toml); a client may set %s",
		what, quoteList(bad), strings.Join(allowed, ", "))
}

// quoteList renders keys as `a`, `b`.
func quoteList(keys []string) string {
	q := make([]string, len(keys))
	for i, k := range keys {
		q[i] = fmt.Sprintf("%q", k)
	}
	return strings.Join(q, ", ")
}
