package downstream

// Test hooks for the external tests (package upstream_test), which cannot
// be internal: they import actors, which imports this package.

// SessionID is an HTTP client's Mcp-Session-Id ("" for stdio).
func SessionID(c *Client) string {
	if h, ok := c.t.(*httpTransport); ok {
		return h.sessionID()
	}
	return ""
}

// PID is a stdio client's child process id (0 for HTTP).
func PID(c *Client) int {
	if s, ok := c.t.(*stdioTransport); ok {
		return s.pid
	}
	return 0
}
