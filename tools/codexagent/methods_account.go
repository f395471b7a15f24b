package codexagent

import (
	"context"
	"encoding/json"
	"strings"

	"troupe/tools"
)

const noParams = `{"type": "object"}`

func accountDefs() []methodDef {
	return []methodDef{
		{name: "gitDiffToRemote", run: gitDiffToRemote,
			desc:   "The git diff of a workspace directory against its remote: {sha, diff}.",
			schema: `{"type": "object", "required": ["cwd"], "properties": {"cwd": {"type": "string"}}}`},
		{name: "getAuthStatus", run: getAuthStatus,
			desc: "How Codex authenticates: authMethod, requiresOpenaiAuth, and with includeToken the token itself (to this session only).",
			schema: `{"type": "object", "properties": {
  "includeToken": {"type": ["boolean", "null"]}, "refreshToken": {"type": ["boolean", "null"]}}}`},
		{name: "getUserSavedConfig", run: getUserSavedConfig, schema: noParams,
			desc: "Codex's saved configuration as the settings newConversation and sendUserTurn take (model, approval and sandbox settings, profiles)."},
		{name: "setDefaultModel", run: setDefaultModel,
			desc: "Saves the default model and reasoning effort in Codex's config.toml (null removes them).",
			schema: `{"type": "object", "properties": {
  "model": {"type": ["string", "null"]}, "reasoningEffort": {"type": ["string", "null"]}}}`},
		{name: "getUserAgent", run: getUserAgent, schema: noParams,
			desc: "The user agent Codex sends to the model provider."},
		{name: "userInfo", run: userInfo, schema: noParams,
			desc: "The e-mail address of the ChatGPT account Codex is signed in with, unverified (allegedUserEmail; null when none)."},
		{name: "loginApiKey", run: loginApiKey,
			desc:   "Signs Codex in with an OpenAI API key; an authStatusChange notification follows.",
			schema: `{"type": "object", "required": ["apiKey"], "properties": {"apiKey": {"type": "string", "minLength": 1}}}`},
		{name: "loginChatGpt", run: loginChatGpt, schema: noParams,
			desc: "Starts a ChatGPT sign-in: returns loginId and the authUrl to open; loginChatGptComplete and authStatusChange notifications follow."},
		{name: "cancelLoginChatGpt", run: cancelLoginChatGpt,
			desc:   "Cancels a ChatGPT sign-in loginChatGpt started.",
			schema: `{"type": "object", "required": ["loginId"], "properties": {"loginId": {"type": "string"}}}`},
		{name: "logoutChatGpt", run: logoutChatGpt, schema: noParams,
			desc: "Signs Codex out; an authStatusChange notification follows."},
	}
}

func gitDiffToRemote(ctx context.Context, c *mcall) (any, error) {
	var p struct {
		Cwd string `json:"cwd"`
	}
	if err := c.decode(&p); err != nil {
		return nil, err
	}
	dir, err := c.ms.s.dir(p.Cwd)
	if err != nil {
		return nil, err
	}
	raw, err := c.rpc(ctx, "gitDiffToRemote", map[string]any{"cwd": dir})
	if err != nil {
		return nil, err
	}
	var out map[string]any
	if err := json.Unmarshal(raw, &out); err != nil {
		return nil, tools.Errorf(tools.KindInternal, "gitDiffToRemote: unreadable answer from Codex")
	}
	return out, nil
}

// getAuthStatus passes the token through to the asking session's answer
// only, and only a token that session set itself (loginApiKey, or a
// ChatGPT login it completed): the operator's credentials, which every
// session's Codex starts with, are never returned. The token is never
// logged, and errors never carry it.
func getAuthStatus(ctx context.Context, c *mcall) (any, error) {
	var p struct {
		IncludeToken *bool `json:"includeToken"`
		RefreshToken *bool `json:"refreshToken"`
	}
	if err := c.decode(&p); err != nil {
		return nil, err
	}
	c.ms.mu.Lock()
	own := c.sess.ownKey
	c.ms.mu.Unlock()
	if !own && p.IncludeToken != nil && *p.IncludeToken {
		no := false
		p.IncludeToken = &no // not even asked of Codex
	}
	raw, err := c.rpc(ctx, "getAuthStatus", map[string]any{"includeToken": p.IncludeToken, "refreshToken": p.RefreshToken})
	if err != nil {
		return nil, err
	}
	var out map[string]any
	if err := json.Unmarshal(raw, &out); err != nil {
		return nil, tools.Errorf(tools.KindInternal, "getAuthStatus: unreadable answer from Codex")
	}
	if p.IncludeToken == nil || !*p.IncludeToken {
		delete(out, "authToken")
	}
	if out["authToken"] != nil && !own {
		delete(out, "authToken")
	}
	return dropNulls(out), nil
}

func getUserSavedConfig(ctx context.Context, c *mcall) (any, error) {
	raw, err := c.rpc(ctx, "config/read", map[string]any{})
	if err != nil {
		return nil, err
	}
	var r struct {
		Config map[string]any `json:"config"`
	}
	if err := json.Unmarshal(raw, &r); err != nil {
		return nil, tools.Errorf(tools.KindInternal, "getUserSavedConfig: unreadable config/read answer: %v", err)
	}
	return map[string]any{"config": savedConfig(r.Config)}, nil
}

// savedConfig is the old UserSavedConfig from config/read's config:
// camelCase, unset members omitted, profiles always present.
func savedConfig(cfg map[string]any) map[string]any {
	out := map[string]any{}
	for from, to := range map[string]string{"approval_policy": "approvalPolicy", "sandbox_mode": "sandboxMode",
		"model": "model", "model_reasoning_effort": "modelReasoningEffort",
		"model_reasoning_summary": "modelReasoningSummary", "model_verbosity": "modelVerbosity", "profile": "profile"} {
		if v, ok := cfg[from]; ok && v != nil {
			out[to] = v
		}
	}
	if sw, ok := cfg["sandbox_workspace_write"].(map[string]any); ok {
		s := map[string]any{"writableRoots": []any{}}
		if roots, ok := sw["writable_roots"].([]any); ok {
			s["writableRoots"] = roots
		}
		for from, to := range map[string]string{"network_access": "networkAccess",
			"exclude_tmpdir_env_var": "excludeTmpdirEnvVar", "exclude_slash_tmp": "excludeSlashTmp"} {
			if v, ok := sw[from]; ok && v != nil {
				s[to] = v
			}
		}
		out["sandboxSettings"] = s
	}
	if t, ok := cfg["tools"].(map[string]any); ok {
		tt := map[string]any{}
		if v, ok := t["web_search"]; ok && v != nil {
			tt["webSearch"] = v
		}
		if v, ok := t["view_image"]; ok && v != nil {
			tt["viewImage"] = v
		}
		if len(tt) > 0 {
			out["tools"] = tt
		}
	}
	profiles := map[string]any{}
	if ps, ok := cfg["profiles"].(map[string]any); ok {
		for name, v := range ps {
			pr, _ := v.(map[string]any)
			profiles[name] = map[string]any{
				"model": pr["model"], "modelProvider": pr["model_provider"], "approvalPolicy": pr["approval_policy"],
				"modelReasoningEffort": pr["model_reasoning_effort"], "modelReasoningSummary": pr["model_reasoning_summary"],
				"modelVerbosity": pr["model_verbosity"], "chatgptBaseUrl": pr["chatgpt_base_url"],
			}
		}
	}
	out["profiles"] = profiles
	return out
}

func setDefaultModel(ctx context.Context, c *mcall) (any, error) {
	var p struct {
		Model           *string `json:"model"`
		ReasoningEffort *string `json:"reasoningEffort"`
	}
	if err := c.decode(&p); err != nil {
		return nil, err
	}
	value := func(s *string) any {
		if s == nil {
			return nil
		}
		return *s
	}
	_, err := c.rpc(ctx, "config/batchWrite", map[string]any{"edits": []any{
		map[string]any{"keyPath": "model", "value": value(p.Model), "mergeStrategy": "replace"},
		map[string]any{"keyPath": "model_reasoning_effort", "value": value(p.ReasoningEffort), "mergeStrategy": "replace"},
	}})
	if err != nil {
		return nil, err
	}
	return map[string]any{}, nil
}

func getUserAgent(ctx context.Context, c *mcall) (any, error) {
	cl, err := c.codex(ctx)
	if err != nil {
		return nil, err
	}
	return map[string]any{"userAgent": cl.info.UserAgent}, nil
}

func userInfo(ctx context.Context, c *mcall) (any, error) {
	raw, err := c.rpc(ctx, "account/read", map[string]any{})
	if err != nil {
		return nil, err
	}
	var r struct {
		Account *struct {
			Type  string  `json:"type"`
			Email *string `json:"email"`
		} `json:"account"`
	}
	_ = json.Unmarshal(raw, &r)
	var email any
	if r.Account != nil && r.Account.Email != nil {
		email = *r.Account.Email
	}
	return map[string]any{"allegedUserEmail": email}, nil
}

// loginApiKey hands the key to Codex; the key appears in no error (Codex's
// messages pass the secret masker, and the key is masked explicitly).
func loginApiKey(ctx context.Context, c *mcall) (any, error) {
	var p struct {
		APIKey string `json:"apiKey"`
	}
	if err := c.decode(&p); err != nil {
		return nil, err
	}
	_, err := c.rpc(ctx, "account/login/start", map[string]any{"type": "apiKey", "apiKey": p.APIKey})
	if err != nil {
		if te, ok := tools.AsError(c.ms.failure(ctx, c.name, c.req, err)); ok {
			te.Message = maskValue(te.Message, p.APIKey)
			return nil, te
		}
		return nil, err
	}
	c.ms.setOwnKey(c.sess, true)
	return map[string]any{}, nil
}

// setOwnKey records whether the credentials in st's home are ones st set.
func (ms *methodSet) setOwnKey(st *msession, own bool) {
	ms.mu.Lock()
	st.ownKey = own
	ms.mu.Unlock()
}

func loginChatGpt(ctx context.Context, c *mcall) (any, error) {
	raw, err := c.rpc(ctx, "account/login/start", map[string]any{"type": "chatgpt"})
	if err != nil {
		return nil, err
	}
	var r struct {
		LoginID string `json:"loginId"`
		AuthURL string `json:"authUrl"`
	}
	if err := json.Unmarshal(raw, &r); err != nil || r.LoginID == "" {
		return nil, tools.Errorf(tools.KindInternal, "loginChatGpt: Codex did not start a ChatGPT login")
	}
	return map[string]any{"loginId": r.LoginID, "authUrl": r.AuthURL}, nil
}

func cancelLoginChatGpt(ctx context.Context, c *mcall) (any, error) {
	var p struct {
		LoginID string `json:"loginId"`
	}
	if err := c.decode(&p); err != nil {
		return nil, err
	}
	raw, err := c.rpc(ctx, "account/login/cancel", map[string]any{"loginId": p.LoginID})
	if err != nil {
		return nil, err
	}
	var r struct {
		Status string `json:"status"`
	}
	_ = json.Unmarshal(raw, &r)
	if r.Status == "notFound" {
		return nil, tools.Errorf(tools.KindNotFound, "login id not found: %s", p.LoginID)
	}
	return map[string]any{}, nil
}

func logoutChatGpt(ctx context.Context, c *mcall) (any, error) {
	if _, err := c.rpc(ctx, "account/logout", nil); err != nil {
		return nil, err
	}
	c.ms.setOwnKey(c.sess, false)
	return map[string]any{}, nil
}

// relayAccount turns app-server's account notifications into the old
// server's: account/updated is authStatusChange {authMethod} (omitted when
// signed out), a finished ChatGPT login is loginChatGptComplete. Only the
// session whose Codex changed hears it; neither carries a credential.
func (ms *methodSet) relayAccount(host *msession, method string, params json.RawMessage) {
	switch method {
	case "account/updated":
		var p struct {
			AuthMode *string `json:"authMode"`
		}
		_ = json.Unmarshal(params, &p)
		n := map[string]any{}
		if p.AuthMode != nil {
			n["authMethod"] = *p.AuthMode
		}
		host.sess.Notify("authStatusChange", n)
	case "account/login/completed":
		var p struct {
			LoginID *string `json:"loginId"`
			Success bool    `json:"success"`
			Error   *string `json:"error"`
		}
		_ = json.Unmarshal(params, &p)
		if p.LoginID == nil {
			return // an API key login: authStatusChange says it
		}
		if p.Success {
			ms.setOwnKey(host, true)
		}
		n := map[string]any{"loginId": *p.LoginID, "success": p.Success}
		if p.Error != nil {
			n["error"] = *p.Error
		}
		host.sess.Notify("loginChatGptComplete", n)
	}
}

// maskValue replaces secret in s.
func maskValue(s, secret string) string {
	if len(secret) < 4 {
		return s
	}
	return strings.ReplaceAll(s, secret, "***")
}
