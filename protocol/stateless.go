package protocol

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strings"
)

// Method names and _meta keys of the stateless revision (2026-07-28).
const (
	MethodServerDiscover      = "server/discover"
	MethodSubscriptionsListen = "subscriptions/listen"

	NotificationSubscriptionsAcknowledged = "notifications/subscriptions/acknowledged"

	MetaProtocolVersion    = "io.modelcontextprotocol/protocolVersion"
	MetaClientInfo         = "io.modelcontextprotocol/clientInfo"
	MetaClientCapabilities = "io.modelcontextprotocol/clientCapabilities"
	MetaLogLevel           = "io.modelcontextprotocol/logLevel"
	MetaServerInfo         = "io.modelcontextprotocol/serverInfo"
	MetaSubscriptionID     = "io.modelcontextprotocol/subscriptionId"
)

// Era is how a request is served. The handshake era (2024-11-05 to
// 2025-11-25) negotiates a version once, with initialize, and its requests
// belong to the session that made; the stateless era (2026-07-28) has no
// session: every request names its version, capabilities and client in its
// _meta. One name for the idea everywhere: era.
type Era uint8

// The eras.
const (
	EraHandshake Era = iota
	EraStateless
)

// String names the era for logs.
func (e Era) String() string {
	if e == EraStateless {
		return "stateless"
	}
	return "handshake"
}

// StatelessMeta is what a stateless-era request says about itself in its
// _meta: there is no session, so every request carries it.
type StatelessMeta struct {
	Version Version
	Client  Implementation
	Caps    ClientCapabilities
	// Level is the request's own log threshold; nil means the server must
	// send no notifications/message for it.
	Level *LoggingLevel
}

// NamesVersion reports whether meta (a request's _meta as sent) names a
// protocol version: the mark of a stateless-era request (server/discover,
// which exists only there, is the other).
func NamesVersion(meta json.RawMessage) bool {
	if len(meta) == 0 || !bytes.Contains(meta, []byte(MetaProtocolVersion)) {
		return false // the common case, decided without decoding
	}
	var m map[string]json.RawMessage
	if json.Unmarshal(meta, &m) != nil {
		return false
	}
	_, ok := m[MetaProtocolVersion]
	return ok
}

// ReadStatelessMeta reads a stateless-era request's _meta (meta, as sent;
// nil when the params had none). The error is the JSON-RPC error the spec
// prescribes: -32602 for a missing or malformed required field, -32022
// (with the supported list) for a version troupe does not serve per
// request. With an error, the result still names the version the request
// asked for when it could be read (the HTTP front tells a handshake
// revision's request from others by it). ParamsNotObject is the error for
// params that are no object.
func ReadStatelessMeta(meta json.RawMessage) (*StatelessMeta, *MetaError) {
	var p map[string]json.RawMessage
	if len(meta) > 0 {
		if err := json.Unmarshal(meta, &p); err != nil {
			return nil, ParamsNotObject()
		}
	}
	rawVersion, ok := p[MetaProtocolVersion]
	if !ok {
		return nil, invalidMeta("_meta." + MetaProtocolVersion + " is required")
	}
	var version string
	if json.Unmarshal(rawVersion, &version) != nil || version == "" {
		return nil, invalidMeta("_meta." + MetaProtocolVersion + " must be a non-empty string")
	}
	m := &StatelessMeta{Version: Version(version)}
	if !m.Version.IsStateless() {
		supported := make([]string, 0, len(AllVersions()))
		for _, v := range AllVersions() {
			supported = append(supported, string(v))
		}
		msg := "Unsupported protocol version"
		if m.Version.HasHandshake() {
			msg = "Unsupported protocol version: " + version + " needs the initialize handshake"
		}
		return m, &MetaError{Code: CodeUnsupportedVersion, Message: msg,
			Data: map[string]any{"supported": supported, "requested": version}}
	}
	rawCaps, ok := p[MetaClientCapabilities]
	if !ok {
		return m, invalidMeta("_meta." + MetaClientCapabilities + " is required")
	}
	if err := CheckSize("_meta."+MetaClientCapabilities, rawCaps, MaxCapabilitiesBytes); err != nil {
		return m, invalidMeta(err.Error())
	}
	if len(rawCaps) == 0 || rawCaps[0] != '{' || json.Unmarshal(rawCaps, &m.Caps) != nil {
		return m, invalidMeta("_meta." + MetaClientCapabilities + " must be an object")
	}
	if raw, ok := p[MetaClientInfo]; ok && string(raw) != "null" {
		if json.Unmarshal(raw, &m.Client) != nil {
			return m, invalidMeta("_meta." + MetaClientInfo + " must be an object with name and version")
		}
		if err := m.Client.CheckSizes("_meta." + MetaClientInfo); err != nil {
			return m, invalidMeta(err.Error())
		}
	}
	if raw, ok := p[MetaLogLevel]; ok {
		var l LoggingLevel
		if json.Unmarshal(raw, &l) != nil || !l.Valid() {
			return m, invalidMeta("_meta." + MetaLogLevel +
				" must be one of debug, info, notice, warning, error, critical, alert, emergency")
		}
		m.Level = &l
	}
	return m, nil
}

// ParamsNotObject is ReadStatelessMeta's error for a stateless-era request
// whose params (or their _meta) are no object.
func ParamsNotObject() *MetaError {
	return invalidMeta("params must be an object with an object _meta")
}

// HeaderMismatch is -32020's message for an HTTP header whose value
// differs from the body's (MCP-Protocol-Version, Mcp-Method, Mcp-Name):
// both values quoted, cut to a readable length.
func HeaderMismatch(header, got, want string) string {
	return "Header mismatch: " + header + " header value " + quoteHeader(got) +
		" does not match body value " + quoteHeader(want)
}

// quoteHeader quotes a value for an error message, cut to a sane length.
func quoteHeader(v string) string {
	const max = 128
	if len(v) > max {
		v = v[:max] + "…"
	}
	return "'" + strings.ToValidUTF8(v, "?") + "'"
}

// MetaError is a JSON-RPC error of the stateless era's request checks.
type MetaError struct {
	Code    int64
	Message string
	Data    any
}

func (e *MetaError) Error() string { return fmt.Sprintf("%d: %s", e.Code, e.Message) }

func invalidMeta(msg string) *MetaError {
	return &MetaError{Code: CodeInvalidParams, Message: "invalid params: " + msg}
}

// CacheScope values: "public" results hold nothing specific to the caller.
const (
	CachePublic  = "public"
	CachePrivate = "private"
)

// Completion says what DecorateResult adds to a stateless-era result.
type Completion struct {
	ServerInfo *Implementation
	// Cache, when set, adds ttlMs and cacheScope (CacheableResult).
	Cache *CacheHint
}

// CacheHint is a CacheableResult's ttlMs and cacheScope.
type CacheHint struct {
	TTLMs int64
	Scope string
}

// DecorateResult adds what 2026-07-28 requires or recommends on every
// result to raw (a JSON object): resultType "complete" unless the result
// already has one, the server's identity in _meta, and cache hints where
// the schema requires them. Members already present are kept.
func DecorateResult(raw json.RawMessage, c Completion) (json.RawMessage, error) {
	var obj map[string]json.RawMessage
	if err := json.Unmarshal(raw, &obj); err != nil || obj == nil {
		return nil, fmt.Errorf("result is not a JSON object")
	}
	if _, ok := obj["resultType"]; !ok {
		obj["resultType"] = json.RawMessage(`"complete"`)
	}
	if c.ServerInfo != nil {
		meta := map[string]json.RawMessage{}
		if m, ok := obj["_meta"]; ok && string(m) != "null" {
			if err := json.Unmarshal(m, &meta); err != nil {
				return nil, fmt.Errorf("result _meta is not an object")
			}
		}
		if _, ok := meta[MetaServerInfo]; !ok {
			b, err := json.Marshal(c.ServerInfo)
			if err != nil {
				return nil, err
			}
			meta[MetaServerInfo] = b
			b, err = json.Marshal(meta)
			if err != nil {
				return nil, err
			}
			obj["_meta"] = b
		}
	}
	if c.Cache != nil {
		if _, ok := obj["ttlMs"]; !ok {
			obj["ttlMs"] = json.RawMessage(fmt.Sprint(c.Cache.TTLMs))
		}
		if _, ok := obj["cacheScope"]; !ok {
			b, _ := json.Marshal(c.Cache.Scope)
			obj["cacheScope"] = b
		}
	}
	return json.Marshal(obj)
}

// DiscoverResult answers server/discover.
type DiscoverResult struct {
	SupportedVersions []Version          `json:"supportedVersions"`
	Capabilities      ServerCapabilities `json:"capabilities"`
	Instructions      string             `json:"instructions,omitempty"`
}
