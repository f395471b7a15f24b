// Package config loads troupe's configuration: embedded defaults, then
// "-c key=value" overrides whose values are parsed as TOML (falling back to
// a plain string, as Codex does). Unknown keys and values of the wrong type
// are errors that name the key.
package config

import (
	_ "embed"
	"fmt"
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
	return &c, c.validate()
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
	switch c.Logging.Format {
	case "text", "json":
	default:
		return fmt.Errorf("config: logging.format must be text or json, got %q", c.Logging.Format)
	}
	return nil
}
