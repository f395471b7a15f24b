package config

import (
	"crypto/tls"
	"crypto/x509"
	"encoding/pem"
	"net"
	"os"
	"slices"
	"strconv"
	"strings"
)

// clusterProviders are the values cluster.provider takes: "" (one process)
// and "etcd". The automanaged provider binds its health server to every
// interface and the kubernetes one cannot be tested here: neither is
// offered.
var clusterProviders = []string{"", "etcd"}

// Clustered reports whether this configuration makes troupe a node of a
// cluster (cluster.provider is set).
func (c *Config) Clustered() bool { return c.Cluster.Provider != "" }

// validateCluster checks [cluster] when a provider is set; with provider
// "" nothing else of the table is read, so nothing else is checked. A
// clustered node needs a host:port to listen on and one others can dial,
// etcd's endpoints, the files of mutual TLS (unless tls_insecure) and the
// approval state key every node shares (a state sealed on one node is
// opened on another).
func (c *Config) validateCluster(ps *problems) {
	cl := c.Cluster
	if !slices.Contains(clusterProviders, cl.Provider) {
		ps.add(p("cluster", "provider"), `cluster.provider must be "" (one process) or "etcd", got %q`, cl.Provider)
		return
	}
	if cl.Provider == "" {
		return
	}
	if strings.TrimSpace(cl.Name) == "" || strings.ContainsAny(cl.Name, "/ \t\n") {
		ps.add(p("cluster", "name"), "cluster.name must be a non-empty name without / or spaces (it prefixes the cluster's keys in etcd), got %q", cl.Name)
	}
	switch {
	case cl.Listen == "":
		ps.require(p("cluster", "listen"), p("cluster", "provider"), "cluster.listen is required with cluster.provider = %q: the HOST:PORT of node-to-node traffic", cl.Provider)
	case !validHostPort(cl.Listen, true):
		ps.add(p("cluster", "listen"), "cluster.listen must be HOST:PORT (port 1 to 65535), got %q", cl.Listen)
	case cl.Advertise == "" && !dialableHost(cl.Listen):
		ps.add(p("cluster", "listen"), "cluster.listen %q names no host other nodes can dial: "+
			"set cluster.advertise to this node's HOST:PORT as the others reach it", cl.Listen)
	}
	if cl.Advertise != "" && (!validHostPort(cl.Advertise, false) || !dialableHost(cl.Advertise)) {
		ps.add(p("cluster", "advertise"), "cluster.advertise must be \"\" or a HOST:PORT other nodes can dial (not 0.0.0.0 or ::), got %q", cl.Advertise)
	}
	if cl.Provider == "etcd" && len(cl.EtcdEndpoints) == 0 {
		ps.require(p("cluster", "etcd_endpoints"), p("cluster", "provider"), `cluster.etcd_endpoints is required with cluster.provider = "etcd": etcd's HOST:PORT entries, such as ["127.0.0.1:2379"]`)
	}
	for i, e := range cl.EtcdEndpoints {
		if !validHostPort(e, false) {
			hint := ""
			if strings.Contains(e, "://") {
				hint = " (write HOST:PORT, without a scheme)"
			}
			ps.add(p("cluster", "etcd_endpoints"), "cluster.etcd_endpoints[%d] must be HOST:PORT, got %q%s", i, e, hint)
		}
	}
	if !cl.TLSInsecure {
		c.validateClusterTLS(ps)
	}
	// An unset ${NAME} reference is reported by itself already.
	if c.Approvals.StateKey == "" && c.RawString("approvals", "state_key") == "" {
		ps.require(p("approvals", "state_key"), p("cluster", "provider"), "approvals.state_key is required with cluster.provider = %q, and every node must share it: "+
			"an approval state sealed on one node is answered on another (make one with `openssl rand -base64 32`)", cl.Provider)
	}
}

// validateClusterTLS checks the three files of mutual TLS between nodes:
// set, readable, PEM of the right kind, and the key the certificate's.
// Errors name the file, never its contents.
func (c *Config) validateClusterTLS(ps *problems) {
	cl := c.Cluster
	read := func(key, path, what string) []byte {
		if path == "" {
			ps.require(p("cluster", key), p("cluster", "provider"), "cluster.%s is required with cluster.provider = %q: %s, a PEM file "+
				"(mutual TLS between nodes; cluster.tls_insecure = true turns it off, for tests only)", key, cl.Provider, what)
			return nil
		}
		b, err := os.ReadFile(path)
		if err != nil {
			ps.add(p("cluster", key), "cluster.%s cannot be read: %s", key, errorText(err))
			return nil
		}
		return b
	}
	cert := read("tls_cert_file", cl.TLSCertFile, "this node's certificate")
	keyPEM := read("tls_key_file", cl.TLSKeyFile, "this node's private key")
	ca := read("tls_ca_file", cl.TLSCAFile, "the CA every node's certificate chains to")
	certOK := cert != nil && hasPEM(cert, func(b *pem.Block) bool {
		_, err := x509.ParseCertificate(b.Bytes)
		return b.Type == "CERTIFICATE" && err == nil
	})
	if cert != nil && !certOK {
		ps.add(p("cluster", "tls_cert_file"), "cluster.tls_cert_file holds no PEM certificate (-----BEGIN CERTIFICATE-----)")
	}
	keyOK := keyPEM != nil && hasPEM(keyPEM, func(b *pem.Block) bool { return strings.HasSuffix(b.Type, "PRIVATE KEY") })
	if keyPEM != nil && !keyOK {
		ps.add(p("cluster", "tls_key_file"), "cluster.tls_key_file holds no PEM private key (-----BEGIN … PRIVATE KEY-----)")
	}
	if certOK && keyOK {
		if _, err := tls.X509KeyPair(cert, keyPEM); err != nil {
			ps.add(p("cluster", "tls_key_file"), "cluster.tls_key_file is not the key of cluster.tls_cert_file's certificate: %s",
				strings.TrimPrefix(err.Error(), "tls: "))
		}
	}
	if ca != nil && !x509.NewCertPool().AppendCertsFromPEM(ca) {
		ps.add(p("cluster", "tls_ca_file"), "cluster.tls_ca_file holds no PEM certificate (-----BEGIN CERTIFICATE-----)")
	}
}

// hasPEM reports whether b holds a PEM block that ok accepts.
func hasPEM(b []byte, ok func(*pem.Block) bool) bool {
	for {
		var block *pem.Block
		block, b = pem.Decode(b)
		if block == nil {
			return false
		}
		if ok(block) {
			return true
		}
	}
}

// validHostPort reports whether s is HOST:PORT with a port from 1 to
// 65535; emptyHost allows ":PORT" (every interface).
func validHostPort(s string, emptyHost bool) bool {
	host, port, err := net.SplitHostPort(s)
	if err != nil || (host == "" && !emptyHost) || strings.ContainsAny(host, "/ @") {
		return false
	}
	n, err := strconv.Atoi(port)
	return err == nil && n >= 1 && n <= 65535
}

// dialableHost reports whether the host of HOST:PORT s is one another
// machine could dial: not empty and not an unspecified address.
func dialableHost(s string) bool {
	host, _, err := net.SplitHostPort(s)
	if err != nil || host == "" {
		return false
	}
	ip := net.ParseIP(host)
	return ip == nil || !ip.IsUnspecified()
}
