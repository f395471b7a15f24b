package config

import (
	"strings"
	"testing"
	"time"
)

func TestDefaults(t *testing.T) {
	c, err := Load(nil)
	if err != nil {
		t.Fatal(err)
	}
	if c.Limits.MaxLineBytes != 4<<20 || c.Limits.CallTimeout != 120*time.Second || c.Server.Name != "troupe" {
		t.Fatalf("unexpected defaults: %+v", c)
	}
}

func TestOverrides(t *testing.T) {
	c, err := Load([]string{"limits.max_line_bytes=2048", "limits.call_timeout=5s", "logging.level=debug", `server.name="x y"`})
	if err != nil {
		t.Fatal(err)
	}
	if c.Limits.MaxLineBytes != 2048 || c.Limits.CallTimeout != 5*time.Second || c.Logging.Level != "debug" || c.Server.Name != "x y" {
		t.Fatalf("overrides not applied: %+v", c)
	}
}

func TestInvalidConfigIsRefusedWithTheKey(t *testing.T) {
	cases := map[string]string{
		"limits.max_line_byte=5":         "max_line_byte",  // unknown key
		"limitz.x=1":                     "limitz",         // unknown table
		"limits.max_line_bytes=lots":     "max_line_bytes", // wrong type
		"limits.call_timeout=soon":       "call_timeout",   // not a duration
		"limits.max_line_bytes=10":       "max_line_bytes", // out of range
		"logging.format=xml":             "logging.format", // not an allowed value
		"limits.max_in_flight=0":         "max_in_flight",  // out of range
		"no-equals-sign":                 "key=value",      // malformed override
		"limits.shutdown_grace=-1s":      "shutdown_grace", // negative
		"limits.page_size=[1,2]":         "page_size",      // wrong type
		"server.instructions={a = 1}":    "instructions",   // wrong type
		"limits.call_timeout=0s":         "call_timeout",   // must be positive
		"logging.format=":                "logging.format", // empty
		"limits.max_in_flight=1.5":       "max_in_flight",  // fractional
		"limits.max_line_bytes=1e9999":   "max_line_bytes", // not representable
		"server.name=[\"a\"]":            "name",           // wrong type
		"limits=5":                       "limits",         // a table replaced by a scalar
		"server.name.first=troupe":       "server.name",    // a scalar used as a table
		"limits.call_timeout=\"5 days\"": "call_timeout",   // not a Go duration
	}
	for override, mention := range cases {
		t.Run(override, func(t *testing.T) {
			_, err := Load([]string{override})
			if err == nil {
				t.Fatalf("-c %s was accepted", override)
			}
			if !strings.Contains(err.Error(), mention) {
				t.Fatalf("-c %s: error %q does not mention %q", override, err, mention)
			}
		})
	}
}
