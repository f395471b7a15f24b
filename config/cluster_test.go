package config

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/base64"
	"encoding/pem"
	"math/big"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"
)

// clusterPKI writes a CA, a node certificate it signed and that
// certificate's key, and a second key that is not the certificate's, as
// PEM files in dir.
func clusterPKI(t *testing.T, dir string) (ca, cert, key, otherKey string) {
	t.Helper()
	newKey := func() *ecdsa.PrivateKey {
		k, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
		if err != nil {
			t.Fatal(err)
		}
		return k
	}
	write := func(name, typ string, der []byte) string {
		path := filepath.Join(dir, name)
		if err := os.WriteFile(path, pem.EncodeToMemory(&pem.Block{Type: typ, Bytes: der}), 0o600); err != nil {
			t.Fatal(err)
		}
		return path
	}
	writeKey := func(name string, k *ecdsa.PrivateKey) string {
		der, err := x509.MarshalPKCS8PrivateKey(k)
		if err != nil {
			t.Fatal(err)
		}
		return write(name, "PRIVATE KEY", der)
	}
	caKey, nodeKey := newKey(), newKey()
	caTmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "troupe test CA"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour),
		IsCA: true, BasicConstraintsValid: true, KeyUsage: x509.KeyUsageCertSign}
	caDER, err := x509.CreateCertificate(rand.Reader, caTmpl, caTmpl, &caKey.PublicKey, caKey)
	if err != nil {
		t.Fatal(err)
	}
	nodeTmpl := &x509.Certificate{SerialNumber: big.NewInt(2), Subject: pkix.Name{CommonName: "node-1"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour), DNSNames: []string{"localhost"},
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth, x509.ExtKeyUsageClientAuth}}
	nodeDER, err := x509.CreateCertificate(rand.Reader, nodeTmpl, caTmpl, &nodeKey.PublicKey, caKey)
	if err != nil {
		t.Fatal(err)
	}
	return write("ca.pem", "CERTIFICATE", caDER), write("node.pem", "CERTIFICATE", nodeDER),
		writeKey("node-key.pem", nodeKey), writeKey("other-key.pem", newKey())
}

// testStateKey is a valid approvals.state_key.
var testStateKey = base64.StdEncoding.EncodeToString([]byte(strings.Repeat("s", 32)))

// TestClusterDefaultsAndOneProcess: without a provider troupe is one
// process and nothing else of [cluster] is checked, however wrong.
func TestClusterDefaultsAndOneProcess(t *testing.T) {
	c, err := load(t, "", nil)
	if err != nil {
		t.Fatal(err)
	}
	if c.Clustered() || c.Cluster.Provider != "" || c.Cluster.Name != "troupe" || c.Cluster.Listen != "" ||
		len(c.Cluster.EtcdEndpoints) != 0 || c.Cluster.TLSInsecure {
		t.Fatalf("defaults: %+v", c.Cluster)
	}
	c, err = load(t, "", nil, "cluster.listen=nowhere", `cluster.etcd_endpoints=["http://x"]`,
		"cluster.tls_cert_file=/no/such/file", "cluster.name=")
	if err != nil {
		t.Fatalf("with provider \"\" the other keys are not checked: %v", err)
	}
	if slices.Contains(c.OwnPaths(), "/no/such/file") {
		t.Fatalf("OwnPaths hides a cluster file of a configuration without a provider: %q", c.OwnPaths())
	}
}

// TestClusterOnTheCommandLine: the brief's -c spelling works, a list
// included, and with tls_insecure needs no TLS files.
func TestClusterOnTheCommandLine(t *testing.T) {
	c, err := load(t, "", nil, "cluster.provider=etcd", "cluster.listen=127.0.0.1:7001",
		`cluster.etcd_endpoints=["127.0.0.1:2379"]`, "cluster.tls_insecure=true", "approvals.state_key="+testStateKey)
	if err != nil {
		t.Fatal(err)
	}
	if !c.Clustered() || c.Cluster.Provider != "etcd" || c.Cluster.Listen != "127.0.0.1:7001" ||
		!slices.Equal(c.Cluster.EtcdEndpoints, []string{"127.0.0.1:2379"}) || !c.Cluster.TLSInsecure {
		t.Fatalf("cluster: %+v", c.Cluster)
	}
}

// TestClusterWithTLSFiles: real PEM files pass; the key is hidden from
// sandboxed runs.
func TestClusterWithTLSFiles(t *testing.T) {
	ca, cert, key, _ := clusterPKI(t, t.TempDir())
	file := writeConfig(t, `[cluster]
provider = "etcd"
listen = "0.0.0.0:7001"
advertise = "node1.internal:7001"
etcd_endpoints = ["10.0.0.5:2379", "[::1]:2379"]
tls_cert_file = "`+cert+`"
tls_key_file = "`+key+`"
tls_ca_file = "`+ca+`"

[approvals]
state_key = "${STATE_KEY}"
`)
	c, err := load(t, file, []string{"HOME=" + t.TempDir(), "STATE_KEY=" + testStateKey})
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Contains(c.OwnPaths(), key) || slices.Contains(c.OwnPaths(), cert) {
		t.Fatalf("OwnPaths should hide the node's key (only): %q", c.OwnPaths())
	}
}

// TestClusterRefusals: each invalid [cluster] value is an error naming
// its key, at its line in the file; a clustered node without
// approvals.state_key is refused, naming it.
func TestClusterRefusals(t *testing.T) {
	dir := t.TempDir()
	ca, cert, key, otherKey := clusterPKI(t, dir)
	notPEM := filepath.Join(dir, "not.pem")
	if err := os.WriteFile(notPEM, []byte("just text\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	unreadable := filepath.Join(dir, "missing.pem")
	good := map[string]string{
		"provider": `"etcd"`, "listen": `"127.0.0.1:7001"`, "etcd_endpoints": `["127.0.0.1:2379"]`,
		"tls_cert_file": `"` + cert + `"`, "tls_key_file": `"` + key + `"`, "tls_ca_file": `"` + ca + `"`,
	}
	for _, tc := range []struct {
		name   string
		set    map[string]string // [cluster] keys over good ("" removes one)
		noKey  bool              // without approvals.state_key
		want   []string
		reject []string // must not appear (file contents, secrets)
	}{
		{name: "provider", set: map[string]string{"provider": `"automanaged"`},
			want: []string{`:2: cluster.provider: must be "" (one process) or "etcd", got "automanaged"`}},
		{name: "no listen", set: map[string]string{"listen": ""}, want: []string{`:2: cluster.listen: is required with cluster.provider = "etcd": the HOST:PORT of node-to-node traffic`}},
		{name: "bad listen", set: map[string]string{"listen": `"127.0.0.1"`},
			want: []string{`:3: cluster.listen: must be HOST:PORT (port 1 to 65535), got "127.0.0.1"`}},
		{name: "unspecified listen", set: map[string]string{"listen": `"0.0.0.0:7001"`},
			want: []string{`:3: cluster.listen: "0.0.0.0:7001" names no host other nodes can dial: set cluster.advertise`}},
		{name: "bad advertise", set: map[string]string{"advertise": `"[::]:7001"`}, want: []string{"cluster.advertise: must be"}},
		{name: "no endpoints", set: map[string]string{"etcd_endpoints": `[]`},
			want: []string{`:4: cluster.etcd_endpoints = []: is required with cluster.provider = "etcd"`}},
		{name: "endpoint URL", set: map[string]string{"etcd_endpoints": `["127.0.0.1:2379", "http://127.0.0.1:2379"]`},
			want: []string{`:4: cluster.etcd_endpoints[1] must be HOST:PORT, got "http://127.0.0.1:2379" (write HOST:PORT, without a scheme)`}},
		{name: "no TLS", set: map[string]string{"tls_cert_file": "", "tls_key_file": "", "tls_ca_file": ""},
			want: []string{"cluster.tls_cert_file: is required", "cluster.tls_key_file: is required", "cluster.tls_ca_file: is required",
				"cluster.tls_insecure = true", "3 problems"}},
		{name: "missing file", set: map[string]string{"tls_ca_file": `"` + unreadable + `"`},
			want: []string{"cluster.tls_ca_file = \"" + unreadable + "\": cannot be read: no such file or directory"}},
		{name: "not PEM", set: map[string]string{"tls_cert_file": `"` + notPEM + `"`, "tls_ca_file": `"` + notPEM + `"`},
			want:   []string{":5: cluster.tls_cert_file = \"" + notPEM + "\": holds no PEM certificate", ":7: cluster.tls_ca_file = \"" + notPEM + "\": holds no PEM certificate"},
			reject: []string{"just text"}},
		{name: "a certificate as key", set: map[string]string{"tls_key_file": `"` + cert + `"`},
			want: []string{"cluster.tls_key_file = \"" + cert + "\": holds no PEM private key"}},
		{name: "another key", set: map[string]string{"tls_key_file": `"` + otherKey + `"`},
			want: []string{"cluster.tls_key_file = \"" + otherKey + "\": is not the key of cluster.tls_cert_file's certificate"}},
		{name: "no state key", noKey: true,
			want: []string{`:2: approvals.state_key: is required with cluster.provider = "etcd", and every node must share it`}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			keys := map[string]string{}
			for k, v := range good {
				keys[k] = v
			}
			for k, v := range tc.set {
				keys[k] = v
			}
			var b strings.Builder
			b.WriteString("[cluster]\n")
			for _, k := range []string{"provider", "listen", "etcd_endpoints", "advertise", "tls_cert_file", "tls_key_file", "tls_ca_file"} {
				if keys[k] != "" {
					b.WriteString(k + " = " + keys[k] + "\n")
				}
			}
			if !tc.noKey {
				b.WriteString("[approvals]\nstate_key = \"" + testStateKey + "\"\n")
			}
			_, err := load(t, writeConfig(t, b.String()), nil)
			if err == nil {
				t.Fatalf("loaded:\n%s", b.String())
			}
			for _, w := range tc.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("the error lacks %q:\n%v\nconfig:\n%s", w, err, b.String())
				}
			}
			for _, r := range append(tc.reject, testStateKey) {
				if strings.Contains(err.Error(), r) {
					t.Errorf("the error shows %q:\n%v", r, err)
				}
			}
		})
	}
}
