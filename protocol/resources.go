package protocol

// ResourcesCapability is the server's resources capability.
type ResourcesCapability struct {
	Subscribe   bool `json:"subscribe,omitempty"`
	ListChanged bool `json:"listChanged,omitempty"`
}

// Resource is one entry of resources/list.
type Resource struct {
	URI         string `json:"uri"`
	Name        string `json:"name"`
	Title       string `json:"title,omitempty"`
	Description string `json:"description,omitempty"`
	MimeType    string `json:"mimeType,omitempty"`
	Size        *int64 `json:"size,omitempty"`
}

// ListResourcesResult answers resources/list.
type ListResourcesResult struct {
	Resources  []Resource `json:"resources"`
	NextCursor string     `json:"nextCursor,omitempty"`
}

// ResourceTemplate is one entry of resources/templates/list.
type ResourceTemplate struct {
	URITemplate string `json:"uriTemplate"`
	Name        string `json:"name"`
	Title       string `json:"title,omitempty"`
	Description string `json:"description,omitempty"`
	MimeType    string `json:"mimeType,omitempty"`
}

// ListResourceTemplatesResult answers resources/templates/list.
type ListResourceTemplatesResult struct {
	ResourceTemplates []ResourceTemplate `json:"resourceTemplates"`
}

// ReadResourceParams is resources/read.
type ReadResourceParams struct {
	URI string `json:"uri"`
}

// ResourceContents is one item of a resources/read result: Text for text,
// Blob (base64) for anything else.
type ResourceContents struct {
	URI      string         `json:"uri"`
	MimeType string         `json:"mimeType,omitempty"`
	Text     *string        `json:"text,omitempty"`
	Blob     string         `json:"blob,omitempty"`
	Meta     map[string]any `json:"_meta,omitempty"`
}

// ReadResourceResult answers resources/read.
type ReadResourceResult struct {
	Contents []ResourceContents `json:"contents"`
}

// ResourceLinkContent is a resource_link content block (2025-06-18 on;
// ShapeResult turns it into text for older revisions).
func ResourceLinkContent(uri, name, description, mimeType string, size int64) Content {
	return Content{Type: "resource_link", URI: uri, Name: name, Description: description, MimeType: mimeType, Size: &size}
}
