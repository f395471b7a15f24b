package protocol

import (
	"encoding/json"
	"strings"
	"testing"
)

func TestNegotiate(t *testing.T) {
	for _, v := range SupportedVersions() {
		if got := Negotiate(string(v)); got != v {
			t.Errorf("Negotiate(%s) = %s, want it echoed", v, got)
		}
	}
	for _, v := range []string{"", "1999-01-01", "2026-07-28", "2025-06-18 "} {
		if got := Negotiate(v); got != Latest {
			t.Errorf("Negotiate(%q) = %s, want the latest (%s)", v, got, Latest)
		}
	}
}

func TestOnlyMarch2025HasBatches(t *testing.T) {
	for _, v := range SupportedVersions() {
		if v.AllowsBatches() != (v == V20250326) {
			t.Errorf("%s: AllowsBatches = %v", v, v.AllowsBatches())
		}
	}
}

func TestShapeToolAndResult(t *testing.T) {
	yes := true
	tool := Tool{Name: "t", Title: "T", InputSchema: json.RawMessage(`{"type":"object"}`),
		OutputSchema: json.RawMessage(`{"type":"object"}`), Annotations: &ToolAnnotations{ReadOnlyHint: &yes},
		Meta: map[string]any{MetaPrefix + "x": 1}}
	old, _ := json.Marshal(ShapeTool(V20241105, tool))
	for _, absent := range []string{"title", "outputSchema", "annotations", "_meta"} {
		if strings.Contains(string(old), `"`+absent+`"`) {
			t.Errorf("2024-11-05 tool carries %s: %s", absent, old)
		}
	}
	cur, _ := json.Marshal(ShapeTool(V20251125, tool))
	for _, present := range []string{"title", "outputSchema", "annotations", "_meta"} {
		if !strings.Contains(string(cur), `"`+present+`"`) {
			t.Errorf("2025-11-25 tool lacks %s: %s", present, cur)
		}
	}
	res := &CallToolResult{StructuredContent: map[string]int{"a": 1},
		Content: []Content{TextContent(`{"a":1}`), {Type: "resource_link", URI: "file:///x", Name: "x"}}}
	shaped, _ := json.Marshal(ShapeResult(V20250326, res))
	if strings.Contains(string(shaped), "structuredContent") || strings.Contains(string(shaped), "resource_link") {
		t.Errorf("2025-03-26 result: %s", shaped)
	}
	if ShapeResult(V20251125, res) != res {
		t.Error("a current result should pass through unchanged")
	}
}

func TestLoggingLevels(t *testing.T) {
	if !LevelWarning.Allows(LevelError) || LevelWarning.Allows(LevelInfo) || LoggingLevel("loud").Valid() {
		t.Fatal("level ordering is wrong")
	}
}

func TestEmptyTextBlockKeepsItsText(t *testing.T) {
	b, err := json.Marshal(CallToolResult{Content: []Content{TextContent("")}})
	if err != nil || string(b) != `{"content":[{"type":"text","text":""}]}` {
		t.Fatalf("%s %v", b, err)
	}
}
