package mcphttp

import (
	"os"
	"testing"

	cmap "github.com/orcaman/concurrent-map"
)

// TestMain sizes protoactor's process registry as cmd/troupe does (one
// shard per bucket), so what the tests measure per session is what the
// server spends.
func TestMain(m *testing.M) {
	cmap.SHARD_COUNT = 1
	os.Exit(m.Run())
}
