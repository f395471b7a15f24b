// Package config loads troupe's configuration: embedded defaults, then
// "-c key=value" overrides whose values are parsed as TOML (falling back to
// a plain string, as Codex does). Unknown keys and values of the wrong type
// are errors that name the key.
package config

import (
	_ "embed"
	"fmt"
	"os"
	"reflect"
	"strings"
	"time"

	"github.com/go-viper/mapstructure/v2"
	"github.com/knadh/koanf/parsers/toml/v2"
	"github.com/knadh/koanf/providers/confmap"
	"github.com/knadh/koanf/providers/rawbytes"
	"github.com/knadh/koanf/v2"
	gotoml "github.com/pelletier/go-toml/v2"
)

//go:embed defaults.toml
var defaults []byte

// Config is troupe's effective configuration.
type Config struct {
	Server  Server  `koanf:"server"`
	Limits  Limits  `koanf:"limits"`
	Logging Logging `koanf:"logging"`
	HTTP    HTTP    `koanf:"http"`
}

// HTTP is the [http] table: the streamable HTTP transport.
type HTTP struct {
	Listen                     string        `koanf:"listen"`
	Path                       string        `koanf:"path"`
	AllowedOrigins             []string      `koanf:"allowed_origins"`
	AllowUnauthenticatedRemote bool          `koanf:"allow_unauthenticated_remote"`
	MaxSessions                int           `koanf:"max_sessions"`
	MaxBodyBytes               int           `koanf:"max_body_bytes"`
	SessionIdleTimeout         time.Duration `koanf:"session_idle_timeout"`
	ReadHeaderTimeout          time.Duration `koanf:"read_header_timeout"`
	ReadTimeout                time.Duration `koanf:"read_timeout"`
	WriteTimeout               time.Duration `koanf:"write_timeout"`
	KeepaliveInterval          time.Duration `koanf:"keepalive_interval"`
	StreamBufferEvents         int           `koanf:"stream_buffer_events"`
	StreamBufferBytes          int           `koanf:"stream_buffer_bytes"`
	Auth                       HTTPAuth      `koanf:"auth"`
}

// HTTPAuth is the [http.auth] table.
type HTTPAuth struct {
	// BearerToken is the resolved token ("${NAME}" references are replaced
	// by the variable's value at load).
	BearerToken string `koanf:"bearer_token"`
}

// Server is the [server] table.
type Server struct {
	Name         string `koanf:"name"`
	Instructions string `koanf:"instructions"`
}

// Limits is the [limits] table.
type Limits struct {
	MaxLineBytes  int           `koanf:"max_line_bytes"`
	MaxInFlight   int           `koanf:"max_in_flight"`
	PageSize      int           `koanf:"page_size"`
	CallTimeout   time.Duration `koanf:"call_timeout"`
	ShutdownGrace time.Duration `koanf:"shutdown_grace"`
}

// Logging is the [logging] table.
type Logging struct {
	Level  string `koanf:"level"`
	Format string `koanf:"format"`
}

// Load returns the embedded defaults with overrides applied; each override
// is "dotted.key=value".
func Load(overrides []string) (*Config, error) {
	k := koanf.New(".")
	if err := k.Load(rawbytes.Provider(defaults), toml.Parser()); err != nil {
		return nil, fmt.Errorf("embedded defaults: %w", err)
	}
	if len(overrides) > 0 {
		m := make(map[string]any, len(overrides))
		for _, o := range overrides {
			key, val, ok := strings.Cut(o, "=")
			key = strings.TrimSpace(key)
			if !ok || key == "" {
				return nil, fmt.Errorf("-c %q: want key=value", o)
			}
			m[key] = parseValue(val)
		}
		if err := k.Load(confmap.Provider(m, "."), nil); err != nil {
			return nil, fmt.Errorf("-c overrides: %w", err)
		}
	}
	var c Config
	err := k.UnmarshalWithConf("", &c, koanf.UnmarshalConf{DecoderConfig: &mapstructure.DecoderConfig{
		ErrorUnused:      true,
		WeaklyTypedInput: false,
		Result:           &c,
		TagName:          "koanf",
		DecodeHook: mapstructure.ComposeDecodeHookFunc(
			mapstructure.StringToTimeDurationHookFunc(),
			exactInt,
		),
	}})
	if err != nil {
		return nil, fmt.Errorf("config: %w", err)
	}
	if c.HTTP.Auth.BearerToken, err = resolveSecret("http.auth.bearer_token", c.HTTP.Auth.BearerToken); err != nil {
		return nil, err
	}
	return &c, c.validate()
}

// resolveSecret replaces a "${NAME}" reference with the environment
// variable's value, so secrets need not be written into config files.
func resolveSecret(key, v string) (string, error) {
	if !strings.HasPrefix(v, "${") || !strings.HasSuffix(v, "}") {
		return v, nil
	}
	name := v[2 : len(v)-1]
	val, ok := os.LookupEnv(name)
	if !ok || val == "" {
		return "", fmt.Errorf("config: %s refers to the environment variable %s, which is not set", key, name)
	}
	return val, nil
}

// parseValue reads an override's value as TOML, or as a plain string when
// it is not TOML (so -c logging.level=debug needs no quotes).
func parseValue(v string) any {
	var doc struct{ V any }
	if err := gotoml.Unmarshal([]byte("V = "+v), &doc); err == nil {
		return doc.V
	}
	return v
}

// exactInt lets TOML integers (int64) fill int fields without enabling weak
// typing (which would also turn "abc" into 0), and refuses floats there:
// mapstructure would truncate 1.5 to 1 without a word.
func exactInt(from, to reflect.Type, data any) (any, error) {
	if to.Kind() != reflect.Int {
		return data, nil
	}
	switch from.Kind() {
	case reflect.Int64:
		return int(data.(int64)), nil
	case reflect.Float32, reflect.Float64:
		return nil, fmt.Errorf("want an integer, got %v", data)
	}
	return data, nil
}

func (c *Config) validate() error {
	switch {
	case c.Limits.MaxLineBytes < 1024:
		return fmt.Errorf("config: limits.max_line_bytes must be at least 1024, got %d", c.Limits.MaxLineBytes)
	case c.Limits.MaxInFlight < 1:
		return fmt.Errorf("config: limits.max_in_flight must be at least 1, got %d", c.Limits.MaxInFlight)
	case c.Limits.PageSize < 1:
		return fmt.Errorf("config: limits.page_size must be at least 1, got %d", c.Limits.PageSize)
	case c.Limits.CallTimeout <= 0:
		return fmt.Errorf("config: limits.call_timeout must be positive, got %s", c.Limits.CallTimeout)
	case c.Limits.ShutdownGrace < 0:
		return fmt.Errorf("config: limits.shutdown_grace must not be negative, got %s", c.Limits.ShutdownGrace)
	}
	switch {
	case !strings.HasPrefix(c.HTTP.Path, "/") || c.HTTP.Path == "/healthz":
		return fmt.Errorf("config: http.path must start with / and not be /healthz, got %q", c.HTTP.Path)
	case c.HTTP.MaxSessions < 1:
		return fmt.Errorf("config: http.max_sessions must be at least 1, got %d", c.HTTP.MaxSessions)
	case c.HTTP.MaxBodyBytes < 1024:
		return fmt.Errorf("config: http.max_body_bytes must be at least 1024, got %d", c.HTTP.MaxBodyBytes)
	case c.HTTP.SessionIdleTimeout <= 0 || c.HTTP.ReadHeaderTimeout <= 0 || c.HTTP.ReadTimeout <= 0 ||
		c.HTTP.WriteTimeout <= 0 || c.HTTP.KeepaliveInterval <= 0:
		return fmt.Errorf("config: http timeouts and intervals must be positive")
	case c.HTTP.StreamBufferEvents < 1 || c.HTTP.StreamBufferBytes < 1024:
		return fmt.Errorf("config: http.stream_buffer_events must be at least 1 and http.stream_buffer_bytes at least 1024")
	}
	switch c.Logging.Format {
	case "text", "json":
	default:
		return fmt.Errorf("config: logging.format must be text or json, got %q", c.Logging.Format)
	}
	return nil
}
