package auth

import (
	"net/url"
	"strings"
)

// MetadataPath is where RFC 9728's protected resource metadata is served;
// the metadata of a resource with a path (https://host/mcp) is at that
// path appended (/.well-known/oauth-protected-resource/mcp).
const MetadataPath = "/.well-known/oauth-protected-resource"

// ProtectedResource is RFC 9728's protected resource metadata: what a
// client reads to find the authorization server that issues tokens for
// this server, and the scopes it knows.
type ProtectedResource struct {
	// Resource is the resource's identifier: the audience tokens must name.
	Resource string `json:"resource"`
	// AuthorizationServers are the issuers whose tokens are accepted.
	AuthorizationServers []string `json:"authorization_servers"`
	// ScopesSupported are the scopes the config names.
	ScopesSupported []string `json:"scopes_supported,omitempty"`
	// BearerMethodsSupported is how a token may be sent: the header only.
	BearerMethodsSupported []string `json:"bearer_methods_supported"`
}

// ResourceDescriber describes the resource a Validator guards
// (the OAuth validator does; static tokens have no metadata).
type ResourceDescriber interface {
	// ProtectedResource is the metadata to serve.
	ProtectedResource() ProtectedResource
	// MetadataURL is the metadata's URL as clients reach it (from
	// http.public_url); "": on the origin of the request being answered.
	MetadataURL() string
}

// Resource returns the description of the resource the chain guards, and
// whether it has one (OAuth is on).
func (c *Chain) Resource() (ResourceDescriber, bool) {
	if c == nil || c.OAuth == nil || c.Metadata == nil {
		return nil, false
	}
	return c.Metadata, true
}

// MetadataURL is where the metadata of the resource at resourceURL is
// served: its origin, then MetadataPath, then its path (RFC 9728 §3.1).
// "" when resourceURL is not an absolute URL.
func MetadataURL(resourceURL string) string {
	u, err := url.Parse(resourceURL)
	if err != nil || u.Scheme == "" || u.Host == "" {
		return ""
	}
	return u.Scheme + "://" + u.Host + MetadataPath + strings.TrimSuffix(u.EscapedPath(), "/")
}

// ProtectedResource implements ResourceDescriber.
func (v *OAuthValidator) ProtectedResource() ProtectedResource {
	return ProtectedResource{
		Resource:               v.opts.Audience,
		AuthorizationServers:   []string{v.opts.Issuer},
		ScopesSupported:        v.ScopesSupported(),
		BearerMethodsSupported: []string{"header"},
	}
}

// MetadataURL implements ResourceDescriber.
func (v *OAuthValidator) MetadataURL() string { return v.opts.MetadataURL }
