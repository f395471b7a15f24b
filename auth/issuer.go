package auth

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"time"

	"github.com/lestrrat-go/jwx/v3/jwk"
)

// maxIssuerDocument bounds an issuer's metadata or JWKS document: a
// hostile or broken issuer cannot make troupe read without end.
const maxIssuerDocument = 1 << 20

// CheckIssuerURL refuses an issuer (or a jwks_uri) that is not https://,
// except on loopback (127.0.0.0/8, ::1, localhost) where http:// is
// accepted for tests and local issuers: keys fetched in the clear from
// another machine could be anyone's.
func CheckIssuerURL(raw string) error {
	u, err := url.Parse(raw)
	if err != nil || u.Host == "" {
		return fmt.Errorf("%q is not an absolute URL", raw)
	}
	if u.RawQuery != "" || u.Fragment != "" {
		return fmt.Errorf("%q has a query or fragment (RFC 8414 forbids them in an issuer)", raw)
	}
	switch u.Scheme {
	case "https":
		return nil
	case "http":
		if loopbackName(u.Hostname()) {
			return nil
		}
		return fmt.Errorf("%q is http:// on a host that is not loopback: use https://", raw)
	default:
		return fmt.Errorf("%q is not an https:// URL", raw)
	}
}

// loopbackName reports whether host names only this machine.
func loopbackName(host string) bool {
	if strings.EqualFold(host, "localhost") {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}

// issuerKeys is an issuer's signing keys as its JWKS publishes them,
// found through its metadata (RFC 8414 or OpenID discovery). Nothing runs
// in the background: keys are fetched when a token needs them (the first
// one, a kid not seen yet, or keys older than maxAge), and fetches are at
// least minInterval apart whatever the tokens ask, so a flood of tokens
// with made-up kids costs the issuer one request per interval.
type issuerKeys struct {
	issuer      string
	client      *http.Client
	timeout     time.Duration
	minInterval time.Duration
	maxAge      time.Duration
	now         func() time.Time
	log         *slog.Logger

	fetching sync.Mutex // one fetch at a time; held across the fetch

	mu        sync.Mutex
	jwksURI   string    // from the metadata; "" until discovered
	keys      jwk.Set   // nil until the first successful fetch
	fetched   time.Time // of keys
	attempted time.Time // of the last fetch, successful or not
	failure   error     // of the last fetch; nil when it succeeded
}

// errIssuerUnavailable wraps why an issuer's keys could not be had.
var errIssuerUnavailable = errors.New("issuer unavailable")

// key returns the key of kid. ok is false when the issuer does not publish
// it (after a refresh, if one was allowed); err is set when troupe has no
// keys at all because the issuer could not be reached or answered badly.
func (k *issuerKeys) key(ctx context.Context, kid string) (jwk.Key, bool, error) {
	if key, ok, fresh := k.lookup(kid); ok && fresh {
		return key, true, nil
	}
	k.refresh(ctx)
	key, ok, _ := k.lookup(kid)
	if ok {
		return key, true, nil
	}
	k.mu.Lock()
	defer k.mu.Unlock()
	if k.keys == nil && k.failure != nil {
		return nil, false, k.failure
	}
	return nil, false, nil
}

// lookup finds kid in the keys at hand; fresh is false when they are
// older than maxAge (or there are none).
func (k *issuerKeys) lookup(kid string) (key jwk.Key, ok, fresh bool) {
	k.mu.Lock()
	defer k.mu.Unlock()
	if k.keys == nil {
		return nil, false, false
	}
	key, ok = k.keys.LookupKeyID(kid)
	return key, ok, k.now().Sub(k.fetched) < k.maxAge
}

// refresh fetches the keys again unless a fetch happened less than
// minInterval ago. A failed fetch keeps the keys at hand (an issuer's
// hiccup does not lock everybody out) and is logged.
func (k *issuerKeys) refresh(ctx context.Context) {
	k.fetching.Lock()
	defer k.fetching.Unlock()
	k.mu.Lock()
	if !k.attempted.IsZero() && k.now().Sub(k.attempted) < k.minInterval {
		k.mu.Unlock()
		return // rate limited, or another caller has just fetched
	}
	k.attempted = k.now()
	uri := k.jwksURI
	k.mu.Unlock()

	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), k.timeout)
	defer cancel()
	var err error
	if uri == "" {
		uri, err = k.discover(ctx)
	}
	var keys jwk.Set
	if err == nil {
		keys, err = k.fetchKeys(ctx, uri)
	}

	k.mu.Lock()
	defer k.mu.Unlock()
	if err != nil {
		k.failure = fmt.Errorf("%w: %w", errIssuerUnavailable, err)
		k.jwksURI = "" // rediscover next time: the metadata may have moved
		k.log.Warn("OAuth issuer's keys could not be fetched; retrying on a later request",
			"issuer", k.issuer, "err", err, "retry_after", k.minInterval)
		return
	}
	k.jwksURI, k.keys, k.fetched, k.failure = uri, keys, k.now(), nil
	k.log.Debug("fetched the OAuth issuer's keys", "issuer", k.issuer, "keys", keys.Len())
}

// discoveryURLs are where an issuer's metadata may be: RFC 8414's
// well-known path inserted before the issuer's path, then OpenID
// Connect's (inserted, then appended, as the MCP authorization spec
// lists them).
func discoveryURLs(issuer string) []string {
	u, err := url.Parse(issuer)
	if err != nil {
		return nil
	}
	p := strings.TrimSuffix(u.Path, "/")
	at := func(path string) string {
		v := *u
		v.Path = path
		v.RawPath = ""
		return v.String()
	}
	if p == "" {
		return []string{at("/.well-known/oauth-authorization-server"), at("/.well-known/openid-configuration")}
	}
	return []string{
		at("/.well-known/oauth-authorization-server" + p),
		at("/.well-known/openid-configuration" + p),
		at(p + "/.well-known/openid-configuration"),
	}
}

// discover reads the issuer's metadata and returns its jwks_uri. The
// metadata's issuer must be the configured one exactly (RFC 8414 §3.3):
// else another server's keys could be taken for the issuer's.
func (k *issuerKeys) discover(ctx context.Context) (string, error) {
	var errs []string
	for _, u := range discoveryURLs(k.issuer) {
		var meta struct {
			Issuer  string `json:"issuer"`
			JWKSURI string `json:"jwks_uri"`
		}
		found, err := k.getJSON(ctx, u, &meta)
		if !found {
			errs = append(errs, err.Error())
			continue
		}
		if err != nil {
			return "", err
		}
		if meta.Issuer != k.issuer {
			return "", fmt.Errorf("the metadata at %s names the issuer %q, not %q", u, meta.Issuer, k.issuer)
		}
		if meta.JWKSURI == "" {
			return "", fmt.Errorf("the metadata at %s has no jwks_uri", u)
		}
		if err := CheckIssuerURL(meta.JWKSURI); err != nil {
			return "", fmt.Errorf("the metadata at %s has a jwks_uri troupe will not fetch: %w", u, err)
		}
		return meta.JWKSURI, nil
	}
	return "", fmt.Errorf("no authorization server metadata found (%s)", strings.Join(errs, "; "))
}

// fetchKeys reads the JWKS at uri and keeps its public keys only.
func (k *issuerKeys) fetchKeys(ctx context.Context, uri string) (jwk.Set, error) {
	var raw json.RawMessage
	if _, err := k.getJSON(ctx, uri, &raw); err != nil {
		return nil, err
	}
	set, err := jwk.Parse(raw)
	if err != nil {
		// jwx's message may quote the document; the key bytes stay out.
		return nil, fmt.Errorf("the JWKS at %s is not a valid key set", uri)
	}
	public, err := jwk.PublicSetOf(set)
	if err != nil {
		return nil, fmt.Errorf("the JWKS at %s holds keys without a public part", uri)
	}
	return public, nil
}

// getJSON GETs u and decodes its JSON body into v. found is false when
// there is no document at u (a status other than 200, or no answer), so
// discovery tries the next place; an error with found true is a document
// that is there but wrong.
func (k *issuerKeys) getJSON(ctx context.Context, u string, v any) (found bool, err error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u, nil)
	if err != nil {
		return false, fmt.Errorf("%s: %w", u, err)
	}
	req.Header.Set("Accept", "application/json")
	resp, err := k.client.Do(req)
	if err != nil {
		var uerr *url.Error
		if errors.As(err, &uerr) {
			err = uerr.Err // the URL is said once, below
		}
		return false, fmt.Errorf("GET %s: %w", u, err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, maxIssuerDocument))
		return false, fmt.Errorf("GET %s: %s", u, resp.Status)
	}
	body, err := io.ReadAll(io.LimitReader(resp.Body, maxIssuerDocument+1))
	if err != nil {
		return true, fmt.Errorf("GET %s: %w", u, err)
	}
	if len(body) > maxIssuerDocument {
		return true, fmt.Errorf("GET %s: the document is larger than %d bytes", u, maxIssuerDocument)
	}
	if err := json.Unmarshal(body, v); err != nil {
		return true, fmt.Errorf("GET %s: not a JSON document", u)
	}
	return true, nil
}
