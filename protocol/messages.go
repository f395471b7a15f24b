package protocol

import (
	"encoding/json"
	"fmt"
)

// Method names troupe handles or sends. Requests expect a response;
// notifications never get one.
const (
	MethodInitialize             = "initialize"
	MethodPing                   = "ping"
	MethodToolsList              = "tools/list"
	MethodToolsCall              = "tools/call"
	MethodLoggingSetLevel        = "logging/setLevel"
	MethodResourcesList          = "resources/list"
	MethodResourcesRead          = "resources/read"
	MethodResourcesTemplatesList = "resources/templates/list"
	MethodElicitationCreate      = "elicitation/create"
	MethodPromptsList            = "prompts/list"
	MethodPromptsGet             = "prompts/get"
	MethodCompletionComplete     = "completion/complete"
	MethodResourcesSubscribe     = "resources/subscribe"
	MethodResourcesUnsubscribe   = "resources/unsubscribe"

	NotificationInitialized      = "notifications/initialized"
	NotificationCancelled        = "notifications/cancelled"
	NotificationProgress         = "notifications/progress"
	NotificationMessage          = "notifications/message"
	NotificationToolsListChanged = "notifications/tools/list_changed"
	// NotificationPromptsListChanged is relayed from downstream servers.
	NotificationPromptsListChanged = "notifications/prompts/list_changed"
	// NotificationResourcesUpdated is relayed from downstream servers to
	// the sessions subscribed to the resource.
	NotificationResourcesUpdated = "notifications/resources/updated"
	// NotificationResourcesListChanged is relayed from downstream servers.
	NotificationResourcesListChanged = "notifications/resources/list_changed"
)

// MetaPrefix namespaces every _meta key troupe adds (reverse-DNS form, as the
// spec asks; "modelcontextprotocol" and "mcp" prefixes are reserved).
const MetaPrefix = "dev.troupe/"

// Implementation names a client or server in initialize.
type Implementation struct {
	Name        string `json:"name"`
	Title       string `json:"title,omitempty"`
	Version     string `json:"version"`
	Description string `json:"description,omitempty"`
	WebsiteURL  string `json:"websiteUrl,omitempty"`
}

// InitializeParams is what a client sends first.
type InitializeParams struct {
	ProtocolVersion string          `json:"protocolVersion"`
	Capabilities    json.RawMessage `json:"capabilities"`
	ClientInfo      *Implementation `json:"clientInfo"`
	// Meta is the request's _meta as sent (troupe reads its
	// "dev.troupe/session" member; CheckSizes bounds it).
	Meta json.RawMessage `json:"_meta,omitempty"`
}

// ClientCapabilities is the subset of the client's declared capabilities
// troupe acts on. Unknown members are kept raw in InitializeParams.
type ClientCapabilities struct {
	Elicitation  *json.RawMessage `json:"elicitation,omitempty"`
	Roots        *json.RawMessage `json:"roots,omitempty"`
	Sampling     *json.RawMessage `json:"sampling,omitempty"`
	Experimental json.RawMessage  `json:"experimental,omitempty"`
}

// InitializeResult answers initialize.
type InitializeResult struct {
	ProtocolVersion Version            `json:"protocolVersion"`
	Capabilities    ServerCapabilities `json:"capabilities"`
	ServerInfo      Implementation     `json:"serverInfo"`
	Instructions    string             `json:"instructions,omitempty"`
}

// ServerCapabilities lists what troupe offers.
type ServerCapabilities struct {
	Tools   *ToolsCapability `json:"tools,omitempty"`
	Logging *struct{}        `json:"logging,omitempty"`
	// Resources is set because calls' spooled output is served as
	// resources (resource_link targets).
	Resources *ResourcesCapability `json:"resources,omitempty"`
	// Prompts and Completions are set when downstream servers may offer
	// them (troupe has none of its own).
	Prompts     *PromptsCapability `json:"prompts,omitempty"`
	Completions *struct{}          `json:"completions,omitempty"`
}

// PromptsCapability says the prompt list may change during a session.
type PromptsCapability struct {
	ListChanged bool `json:"listChanged"`
}

// ToolsCapability says the tool list may change during a session.
type ToolsCapability struct {
	ListChanged bool `json:"listChanged"`
}

// Tool describes one tool in tools/list. Fields a negotiated revision lacks
// are removed by ShapeTool before sending.
type Tool struct {
	Name         string           `json:"name"`
	Title        string           `json:"title,omitempty"`
	Description  string           `json:"description,omitempty"`
	InputSchema  json.RawMessage  `json:"inputSchema"`
	OutputSchema json.RawMessage  `json:"outputSchema,omitempty"`
	Annotations  *ToolAnnotations `json:"annotations,omitempty"`
	Meta         map[string]any   `json:"_meta,omitempty"`
}

// ToolAnnotations are the behaviour hints clients use to decide, among other
// things, whether a call needs a person's approval (Codex does).
type ToolAnnotations struct {
	Title           string `json:"title,omitempty"`
	ReadOnlyHint    *bool  `json:"readOnlyHint,omitempty"`
	DestructiveHint *bool  `json:"destructiveHint,omitempty"`
	IdempotentHint  *bool  `json:"idempotentHint,omitempty"`
	OpenWorldHint   *bool  `json:"openWorldHint,omitempty"`
}

// ListToolsParams is the tools/list request.
type ListToolsParams struct {
	Cursor *string `json:"cursor,omitempty"`
}

// ListToolsResult is one page of tools.
type ListToolsResult struct {
	Tools      []Tool `json:"tools"`
	NextCursor string `json:"nextCursor,omitempty"`
}

// RequestMeta is the part of a request's _meta troupe reads.
type RequestMeta struct {
	ProgressToken json.RawMessage `json:"progressToken,omitempty"`
	// TimeoutMs is troupe's extension (dev.troupe/timeoutMs): the client's
	// own deadline for the call, which troupe honours when it is shorter
	// than the tool's ceiling.
	TimeoutMs *int64 `json:"dev.troupe/timeoutMs,omitempty"`
}

// CallToolParams is the tools/call request.
type CallToolParams struct {
	Name      string          `json:"name"`
	Arguments json.RawMessage `json:"arguments,omitempty"`
	Meta      *RequestMeta    `json:"_meta,omitempty"`
}

// CallToolResult is a tool's answer. IsError marks a tool execution error
// (bad arguments, refused path, failure): the model sees it and can correct
// itself, unlike a JSON-RPC error.
type CallToolResult struct {
	Content           []Content      `json:"content"`
	StructuredContent any            `json:"structuredContent,omitempty"`
	IsError           bool           `json:"isError,omitempty"`
	Meta              map[string]any `json:"_meta,omitempty"`
}

// Content is one content block. Only the fields of its Type are set.
type Content struct {
	Type     string          `json:"type"`
	Text     string          `json:"text,omitempty"`
	Data     string          `json:"data,omitempty"`
	MimeType string          `json:"mimeType,omitempty"`
	URI      string          `json:"uri,omitempty"`
	Name     string          `json:"name,omitempty"`
	Resource json.RawMessage `json:"resource,omitempty"`
	// Description and Size belong to resource_link blocks.
	Description string `json:"description,omitempty"`
	Size        *int64 `json:"size,omitempty"`
	// Raw, when set, is the block exactly as a downstream server sent it,
	// and is what gets encoded (annotations, _meta and fields troupe does
	// not know pass through). Type and URI are copied out of it so results
	// can still be shaped for older revisions.
	Raw json.RawMessage `json:"-"`
}

// MarshalJSON encodes Raw when set, else the fields.
// A text block always carries "text", even empty: clients (Codex) reject
// a text block without it.
func (c Content) MarshalJSON() ([]byte, error) {
	if c.Raw != nil {
		return c.Raw, nil
	}
	if c.Type == "text" {
		return json.Marshal(struct {
			Type string `json:"type"`
			Text string `json:"text"`
		}{c.Type, c.Text})
	}
	type fields Content // without this method
	return json.Marshal(fields(c))
}

// RawContent wraps a block a downstream server sent, for passing through.
// It fails when raw is not a JSON object with a string "type".
func RawContent(raw json.RawMessage) (Content, error) {
	var head struct {
		Type string `json:"type"`
		URI  string `json:"uri"`
	}
	if err := json.Unmarshal(raw, &head); err != nil || head.Type == "" {
		return Content{}, fmt.Errorf("content block is not an object with a type")
	}
	return Content{Type: head.Type, URI: head.URI, Raw: raw}, nil
}

// TextContent is a text block.
func TextContent(s string) Content { return Content{Type: "text", Text: s} }

// CancelledParams is notifications/cancelled.
type CancelledParams struct {
	RequestID json.RawMessage `json:"requestId"`
	Reason    string          `json:"reason,omitempty"`
}

// ProgressParams is notifications/progress.
type ProgressParams struct {
	ProgressToken json.RawMessage `json:"progressToken"`
	Progress      float64         `json:"progress"`
	Total         *float64        `json:"total,omitempty"`
	Message       string          `json:"message,omitempty"`
}

// SetLevelParams is logging/setLevel.
type SetLevelParams struct {
	Level LoggingLevel `json:"level"`
}

// LoggingMessageParams is notifications/message.
type LoggingMessageParams struct {
	Level  LoggingLevel `json:"level"`
	Logger string       `json:"logger,omitempty"`
	Data   any          `json:"data"`
}
