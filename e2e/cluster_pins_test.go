package e2e

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// The pins of a cluster (issue 29): the nodes keep the versions of their
// downstream tools they trust in etcd, all the same; a change is recorded
// once for the cluster; an operator accepts on any node's status page.

// clusterPinsConfig is a clustered config with one downstream server ds
// at url (tools not approved by a person, so a call shows whether the
// tool is served).
func clusterPinsConfig(etcd, url string) string {
	return `[approvals]
state_key = "00000000000000000000000000000000000000000000000000000000000000aa"

[cluster]
provider = "etcd"
listen = "127.0.0.1:7999"
etcd_endpoints = ["` + etcd + `"]
tls_insecure = true

[mcp_servers.ds]
url = "` + url + `"
requires_approval = false
startup_timeout_sec = 2
`
}

// `troupe tools --accept` cannot reach etcd (the default build does not
// link its client, and the command is not a node): with a clustered config
// it refuses, saying where a cluster's pins are accepted, and pins
// nothing into a local file the nodes would never read; `troupe tools`
// does not claim to know what the cluster holds.
func TestClusterPinsAreAcceptedOnANodeNotFromTheCLI(t *testing.T) {
	fx := newFixture(t)
	state := t.TempDir()
	cfg := filepath.Join(t.TempDir(), "troupe.toml")
	writeConfig(t, cfg, clusterPinsConfig("127.0.0.1:1", "http://127.0.0.1:1/mcp"))
	run := func(args ...string) (string, error) {
		cmd := exec.Command(troupeBinary(t), append([]string{"tools", "--workspace", fx.dir, "--config", cfg}, args...)...)
		cmd.Env = append(withoutVar(os.Environ(), "XDG_STATE_HOME"), "XDG_STATE_HOME="+state)
		out, err := cmd.CombinedOutput()
		return string(out), err
	}
	out, err := run("--accept", "ds")
	if err == nil || !strings.Contains(out, "kept in etcd") || !strings.Contains(out, "status page of any node") {
		t.Errorf("troupe tools --accept with a clustered config: %v\n%s\nwant a refusal naming etcd and the status page", err, out)
	}
	out, err = run()
	if err != nil || !strings.Contains(out, "held tools are not listed") || strings.Contains(out, "holds every downstream tool") {
		t.Errorf("troupe tools with a clustered config: %v\n%s\nwant held tools not listed, saying why", err, out)
	}
	if entries, _ := os.ReadDir(filepath.Join(state, "troupe")); len(entries) > 0 {
		var names []string
		for _, e := range entries {
			names = append(names, e.Name())
		}
		t.Errorf("the CLI wrote %v in the state directory: a cluster's pins are not kept locally", names)
	}
}
