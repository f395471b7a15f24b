package config_test

import (
	"fmt"

	"troupe/config"
)

// Overrides use Codex's -c syntax: the value is TOML when it parses as TOML
// and a plain string otherwise.
func ExampleLoad() {
	cfg, err := config.Load(config.Options{
		Overrides: []string{"limits.call_timeout=30s", "logging.level=debug"},
		Environ:   []string{}, // no file, no environment overrides
	})
	if err != nil {
		panic(err)
	}
	fmt.Println(cfg.Limits.CallTimeout, cfg.Logging.Level)

	_, err = config.Load(config.Options{Overrides: []string{"limits.calltimeout=30s"}, Environ: []string{}})
	fmt.Println(err)
	// Output:
	// 30s debug
	// -c limits.calltimeout=30s: limits.calltimeout: unknown key (did you mean limits.call_timeout?)
}
