package docs

import (
	"crypto/tls"

	"troupe/tools"
)

// ToolWithTLS is Tool with a client TLS configuration, so tests can trust
// an httptest server's certificate.
func ToolWithTLS(opts Options, cfg *tls.Config) (tools.Tool, error) {
	t, err := newFetchTool(opts)
	if err != nil {
		return nil, err
	}
	t.tlsConfig = cfg
	return t, nil
}

// DefaultDial is the production Dial, for the test that checks its own
// address check.
var DefaultDial = defaultDial
