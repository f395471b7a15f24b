package auth

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"slices"
	"strings"
	"time"

	"github.com/lestrrat-go/jwx/v3/jwa"
	"github.com/lestrrat-go/jwx/v3/jwk"
	"github.com/lestrrat-go/jwx/v3/jws"
	"github.com/lestrrat-go/jwx/v3/jwt"

	"troupe/identity"
)

// OAuthOptions configure an OAuthValidator ([auth.oauth]).
type OAuthOptions struct {
	// Issuer is the authorization server whose tokens are accepted: https://,
	// or http:// on loopback.
	Issuer string
	// Audience is the resource tokens must name in aud (RFC 8707): this
	// server's MCP URL.
	Audience string
	// RequiredScopes must all be in a token; one missing answers 403
	// insufficient_scope.
	RequiredScopes []string
	// SubjectClaim names the claim that says who the caller is (default
	// "sub").
	SubjectClaim string
	// Leeway is the clock skew allowed on exp, nbf and iat (default 5 s).
	Leeway time.Duration
	// Scopes maps a scope to the tool globs it grants; empty: a valid token
	// may use every tool.
	Scopes map[string][]string
	// OperatorScopes are scopes whose holders are operators ("scope:<s>"
	// entries of auth.operators).
	OperatorScopes []string
	// MetadataURL is where clients reach the protected resource metadata
	// (MetadataURL(http.public_url)); "": on the origin of each request.
	MetadataURL string

	// Client fetches the issuer's metadata and keys (default: a client
	// that does not follow redirects to plain http).
	Client *http.Client
	// FetchTimeout bounds one fetch of the metadata and keys (default 10 s).
	FetchTimeout time.Duration
	// MinRefresh is the least time between two fetches of the keys,
	// whatever the tokens' kids (default 10 s).
	MinRefresh time.Duration
	// MaxAge is how long fetched keys are used before they are fetched
	// again (default 15 min), so a key the issuer withdrew stops working.
	MaxAge time.Duration
	// Logger logs fetch failures (never a token or key); nil: discarded.
	Logger *slog.Logger
	// Now is the clock (tests); nil: time.Now.
	Now func() time.Time
}

// DefaultLeeway is the clock skew allowed on exp, nbf and iat when the
// config does not say.
const DefaultLeeway = 5 * time.Second

// maxTokenBytes bounds the access tokens troupe parses.
const maxTokenBytes = 16 << 10

// allowedAlgorithms are the signature algorithms a token may use: the
// asymmetric ones only. "none" and HMAC (HS*) are never accepted, so a
// token "signed" with the issuer's public key as an HMAC secret fails.
var allowedAlgorithms = map[string]jwa.KeyType{
	"RS256": jwa.RSA(), "RS384": jwa.RSA(), "RS512": jwa.RSA(),
	"PS256": jwa.RSA(), "PS384": jwa.RSA(), "PS512": jwa.RSA(),
	"ES256": jwa.EC(), "ES384": jwa.EC(), "ES512": jwa.EC(),
	"EdDSA": jwa.OKP(), "Ed25519": jwa.OKP(),
}

// OAuthValidator validates OAuth access tokens (JWTs, RFC 9068) issued by
// one authorization server, with lestrrat-go/jwx doing the parsing and
// the cryptography. It starts no goroutine: the issuer's keys are fetched
// on a request's behalf (issuer.go), so there is nothing to stop.
type OAuthValidator struct {
	opts OAuthOptions
	keys *issuerKeys
}

// NewOAuth checks the options and returns the validator. It does not
// contact the issuer: an issuer unreachable at start-up does not stop
// troupe; the first token fetches its keys.
func NewOAuth(o OAuthOptions) (*OAuthValidator, error) {
	if err := CheckIssuerURL(o.Issuer); err != nil {
		return nil, fmt.Errorf("auth.oauth.issuer: %w", err)
	}
	if o.Audience == "" {
		return nil, errors.New("auth.oauth: no audience (set auth.oauth.audience or http.public_url)")
	}
	if o.SubjectClaim == "" {
		o.SubjectClaim = "sub"
	}
	if o.Leeway <= 0 {
		o.Leeway = DefaultLeeway
	}
	if o.FetchTimeout <= 0 {
		o.FetchTimeout = 10 * time.Second
	}
	if o.MinRefresh <= 0 {
		o.MinRefresh = 10 * time.Second
	}
	if o.MaxAge <= 0 {
		o.MaxAge = 15 * time.Minute
	}
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
	if o.Now == nil {
		o.Now = time.Now
	}
	if o.Client == nil {
		o.Client = &http.Client{CheckRedirect: func(req *http.Request, via []*http.Request) error {
			if len(via) >= 5 {
				return errors.New("too many redirects")
			}
			return CheckIssuerURL(req.URL.Scheme + "://" + req.URL.Host)
		}}
	}
	return &OAuthValidator{opts: o, keys: &issuerKeys{
		issuer: o.Issuer, client: o.Client, timeout: o.FetchTimeout,
		minInterval: o.MinRefresh, maxAge: o.MaxAge, now: o.Now, log: o.Logger,
	}}, nil
}

// Issuer is the authorization server the validator trusts.
func (v *OAuthValidator) Issuer() string { return v.opts.Issuer }

// Audience is the resource tokens must be issued for.
func (v *OAuthValidator) Audience() string { return v.opts.Audience }

// ScopesSupported are the scopes the config names: the mapped ones and
// the required ones, sorted (RFC 9728's scopes_supported).
func (v *OAuthValidator) ScopesSupported() []string {
	var out []string
	for s := range v.opts.Scopes {
		out = append(out, s)
	}
	out = append(out, v.opts.RequiredScopes...)
	slices.Sort(out)
	return slices.Compact(out)
}

// invalid is a 401 invalid_token refusal.
func invalid(msg string) *Refusal {
	return &Refusal{Status: http.StatusUnauthorized, Code: "invalid_token", Message: msg}
}

// Validate implements Validator: the token must be a JWT signed by one of
// the issuer's keys with an allowed algorithm, for this audience, current,
// of a subject, and hold the required scopes.
func (v *OAuthValidator) Validate(ctx context.Context, token string) (*identity.Identity, *Refusal) {
	if refusal := checkShape(token); refusal != nil {
		return nil, refusal
	}
	var refusal *Refusal // set by the key provider, which knows why it gave no key
	provider := jws.KeyProviderFunc(func(_ context.Context, sink jws.KeySink, sig *jws.Signature, _ *jws.Message) error {
		key, alg, r := v.keyFor(ctx, sig.ProtectedHeaders())
		if r != nil {
			refusal = r
			return errors.New(r.Message)
		}
		sink.Key(alg, key)
		return nil
	})
	tok, err := jwt.Parse([]byte(token),
		jwt.WithKeyProvider(provider),
		jwt.WithValidate(true),
		jwt.WithIssuer(v.opts.Issuer),
		jwt.WithAudience(v.opts.Audience),
		jwt.WithAcceptableSkew(v.opts.Leeway),
		jwt.WithClock(jwt.ClockFunc(v.opts.Now)),
		jwt.WithRequiredClaim("exp"),
	)
	if err != nil {
		if refusal != nil {
			return nil, refusal
		}
		return nil, invalid(claimProblem(err))
	}
	who, r := v.identity(tok)
	if r != nil {
		return nil, r
	}
	return who, nil
}

// checkShape refuses what is not a signed JWT before any parsing: an
// opaque token (troupe does not introspect), an encrypted one, or one too
// large.
func checkShape(token string) *Refusal {
	if len(token) > maxTokenBytes {
		return invalid("the access token is too large")
	}
	switch strings.Count(token, ".") {
	case 2:
	case 4:
		return invalid("encrypted (JWE) access tokens are not supported: the issuer must sign JWT access tokens")
	default:
		return invalid("opaque access tokens are not supported: troupe validates JWT access tokens " +
			"(RFC 9068) only; token introspection (RFC 7662) is not implemented")
	}
	head, _, _ := strings.Cut(token, ".")
	raw, err := base64.RawURLEncoding.DecodeString(head)
	if err != nil || !json.Valid(raw) {
		return invalid("the access token is not a JWT: its header is not base64url JSON")
	}
	return nil
}

// keyFor picks the key that must have signed a token with these headers,
// or says why none will do.
func (v *OAuthValidator) keyFor(ctx context.Context, h jws.Headers) (jwk.Key, jwa.SignatureAlgorithm, *Refusal) {
	alg, _ := h.Algorithm()
	kty, ok := allowedAlgorithms[alg.String()]
	if !ok {
		return nil, alg, invalid("the access token's algorithm " + headerValue(alg.String()) + " is not accepted " +
			"(only asymmetric signatures: RS*, PS*, ES*, EdDSA)")
	}
	if typ, ok := h.Type(); ok {
		switch strings.ToLower(typ) {
		case "jwt", "at+jwt", "application/at+jwt":
		default:
			return nil, alg, invalid("the token's type " + headerValue(typ) + " is not an access token's (want at+jwt)")
		}
	}
	kid, _ := h.KeyID()
	if kid == "" {
		return nil, alg, invalid("the access token has no kid: the key that signed it cannot be chosen")
	}
	key, found, err := v.keys.key(ctx, kid)
	if err != nil {
		return nil, alg, invalid("the OAuth issuer " + v.opts.Issuer + " could not be used to check the token: " +
			strings.TrimPrefix(err.Error(), errIssuerUnavailable.Error()+": "))
	}
	if !found {
		return nil, alg, invalid("the access token's key (kid) is not one the issuer publishes")
	}
	if key.KeyType() != kty {
		return nil, alg, invalid(fmt.Sprintf("the issuer's key for this kid is of type %s, not one for %s",
			key.KeyType(), alg.String()))
	}
	if ka, ok := key.Algorithm(); ok && ka.String() != alg.String() {
		return nil, alg, invalid(fmt.Sprintf("the issuer's key for this kid is for %s, not %s", ka.String(), alg.String()))
	}
	if use, ok := key.KeyUsage(); ok && use != "sig" {
		return nil, alg, invalid("the issuer's key for this kid is not a signing key")
	}
	return key, alg, nil
}

// headerValue quotes a token header's value for a refusal when it is a
// short name, as algorithms and types are; anything else is not repeated
// (a refusal is logged, and says nothing of the token beyond a name).
func headerValue(v string) string {
	if v == "" {
		return "(none)"
	}
	if len(v) > 24 || strings.ContainsFunc(v, func(r rune) bool {
		return !(r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || strings.ContainsRune("+-._/", r))
	}) {
		return "(not a name)"
	}
	return `"` + v + `"`
}

// claimProblem says which check a parsed, verified-or-not token failed,
// in words that hold nothing of the token.
func claimProblem(err error) string {
	switch {
	case errors.Is(err, jwt.TokenExpiredError()):
		return "the access token has expired"
	case errors.Is(err, jwt.TokenNotYetValidError()):
		return "the access token is not valid yet (nbf is in the future)"
	case errors.Is(err, jwt.InvalidIssuedAtError()):
		return "the access token was issued in the future (iat)"
	case errors.Is(err, jwt.InvalidIssuerError()):
		return "the access token is from another issuer (iss)"
	case errors.Is(err, jwt.InvalidAudienceError()):
		return "the access token is not for this server (aud does not name it; RFC 8707)"
	case errors.Is(err, jwt.MissingRequiredClaimError()):
		return "the access token has no expiry (exp)"
	case errors.Is(err, jwt.ValidateError()):
		return "the access token's claims are not valid"
	default:
		return "the access token's signature could not be verified"
	}
}

// identity turns a verified token into its subject's identity.
func (v *OAuthValidator) identity(tok jwt.Token) (*identity.Identity, *Refusal) {
	var subject string
	if v.opts.SubjectClaim == "sub" {
		subject, _ = tok.Subject()
	} else {
		var s any
		if err := tok.Get(v.opts.SubjectClaim, &s); err == nil {
			subject, _ = s.(string)
		}
	}
	if subject == "" {
		return nil, invalid("the access token has no " + v.opts.SubjectClaim + " claim naming its subject")
	}
	scopes := tokenScopes(tok)
	for _, need := range v.opts.RequiredScopes {
		if !slices.Contains(scopes, need) {
			return nil, &Refusal{Status: http.StatusForbidden, Code: "insufficient_scope",
				Scope:   strings.Join(v.opts.RequiredScopes, " "),
				Message: "the access token lacks the scope " + need}
		}
	}
	who := &identity.Identity{Kind: identity.OAuth, Issuer: v.opts.Issuer, Name: subject, Scopes: scopes}
	if len(v.opts.Scopes) > 0 {
		grant := &identity.Grant{Allow: []string{}}
		for _, s := range scopes {
			for _, glob := range v.opts.Scopes[s] {
				if !slices.Contains(grant.Allow, glob) {
					grant.Allow = append(grant.Allow, glob)
				}
			}
		}
		who.Tools = grant
	}
	who.Operator = slices.ContainsFunc(v.opts.OperatorScopes, func(s string) bool { return slices.Contains(scopes, s) })
	return who, nil
}

// tokenScopes reads the token's scopes: the space-separated "scope"
// string (RFC 9068), else an "scp" array (or string) as some issuers
// write them.
func tokenScopes(tok jwt.Token) []string {
	var v any
	if err := tok.Get("scope", &v); err == nil {
		if s, ok := v.(string); ok {
			return strings.Fields(s)
		}
	}
	if err := tok.Get("scp", &v); err == nil {
		switch s := v.(type) {
		case string:
			return strings.Fields(s)
		case []any:
			var out []string
			for _, e := range s {
				if str, ok := e.(string); ok && str != "" {
					out = append(out, str)
				}
			}
			return out
		}
	}
	return nil
}
