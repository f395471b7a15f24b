package protocol

// ShapeTool returns t as revision v defines a Tool: members v does not know
// are removed, so a 2024-11-05 client never sees outputSchema and the like.
func ShapeTool(v Version, t Tool) Tool {
	if !v.HasTitles() {
		t.Title = ""
	}
	if !v.HasStructuredContent() {
		t.OutputSchema = nil
	}
	if !v.HasToolAnnotations() {
		t.Annotations = nil
	}
	if !v.HasToolMeta() {
		t.Meta = nil
	}
	return t
}

// ShapeResult returns r as revision v defines a CallToolResult. The text
// blocks always carry the same JSON as structuredContent, so dropping it for
// older revisions loses nothing.
func ShapeResult(v Version, r *CallToolResult) *CallToolResult {
	if v.HasStructuredContent() && v.HasResourceLinks() && v.HasAudio() {
		return r
	}
	out := *r
	if !v.HasStructuredContent() {
		out.StructuredContent = nil
	}
	out.Content = make([]Content, 0, len(r.Content))
	for _, c := range r.Content {
		switch {
		case c.Type == "resource_link" && !v.HasResourceLinks():
			out.Content = append(out.Content, TextContent(c.URI))
		case c.Type == "audio" && !v.HasAudio():
			out.Content = append(out.Content, TextContent("[audio content omitted: not supported by protocol "+string(v)+"]"))
		default:
			out.Content = append(out.Content, c)
		}
	}
	return &out
}
