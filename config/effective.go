package config

import (
	"bytes"
	"fmt"
	"strings"

	gotoml "github.com/pelletier/go-toml/v2"

	"troupe/redact"
)

// Effective renders the merged configuration as TOML for people to read,
// with secrets masked: a "${NAME}" reference is shown as written (values
// never are), and literal values of keys that hold secrets (the bearer
// token, env and header entries named like *_TOKEN, *_KEY, *_SECRET,
// *PASSWORD*, Authorization) are shown as "<redacted>".
func (c *Config) Effective() ([]byte, error) {
	masked := maskTree(c.raw, nil)
	var buf bytes.Buffer
	if c.File != "" {
		fmt.Fprintf(&buf, "# effective configuration: embedded defaults, %s, environment, -c flags\n", c.File)
	} else {
		buf.WriteString("# effective configuration: embedded defaults, environment, -c flags (no config file)\n")
	}
	enc := gotoml.NewEncoder(&buf)
	enc.SetIndentTables(true)
	if err := enc.Encode(masked); err != nil {
		return nil, err
	}
	return buf.Bytes(), nil
}

func maskTree(m map[string]any, path []string) map[string]any {
	out := make(map[string]any, len(m))
	for k, v := range m {
		p := append(append([]string(nil), path...), k)
		switch t := v.(type) {
		case map[string]any:
			out[k] = maskTree(t, p)
		case string:
			out[k] = maskValue(p, t)
		case []any:
			items := make([]any, len(t))
			for i, it := range t {
				switch v := it.(type) {
				case string:
					items[i] = maskValue(p, v)
				case map[string]any: // an entry of an array of tables
					items[i] = maskTree(v, append(p, entryPart(i+1)))
				default:
					items[i] = it
				}
			}
			out[k] = items
		default:
			out[k] = v
		}
	}
	return out
}

// maskValue keeps references and harmless values, hides the rest.
func maskValue(path []string, v string) string {
	if secretRef.MatchString(v) {
		return v // the reference names the variable, not its value
	}
	if v != "" && IsSecretKey(path) {
		return "<redacted>"
	}
	return v
}

// IsSecretKey reports whether a config key holds a secret by its name: the
// bearer token, the approval state keys, and entries of env or header
// tables named like a credential.
func IsSecretKey(path []string) bool {
	if len(path) == 0 {
		return false
	}
	last := strings.ToUpper(path[len(path)-1])
	if last == "BEARER_TOKEN" || last == "AUTHORIZATION" || last == "STATE_KEY" || last == "PREVIOUS_STATE_KEYS" {
		return true
	}
	if len(path) >= 2 {
		switch path[len(path)-2] {
		case "env", "http_headers":
			return IsSecretName(last)
		}
	}
	return false
}

// IsSecretName reports whether an environment variable or header name looks
// like it holds a credential (*_TOKEN, *_KEY, *_SECRET, *PASSWORD*, …):
// redact.IsSecretKey, so the config display and the redaction of logs and
// output agree.
func IsSecretName(name string) bool {
	return redact.IsSecretKey(name)
}

// RawString is a string value as configured, before "${NAME}" references
// are resolved ("" when absent).
func (c *Config) RawString(path ...string) string {
	var v any = c.raw
	for _, p := range path {
		m, ok := v.(map[string]any)
		if !ok {
			return ""
		}
		v = m[p]
	}
	s, _ := v.(string)
	return s
}
