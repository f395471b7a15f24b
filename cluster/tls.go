package cluster

import (
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"os"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/credentials/insecure"
)

// TLSFiles name the PEM files of mutual TLS between nodes: protoactor's
// remote delivers any message to any actor for whoever reaches its port, so
// only nodes holding a certificate of the cluster's CA may reach it.
type TLSFiles struct {
	CertFile, KeyFile, CAFile string
	// Insecure turns TLS off: for tests on loopback only.
	Insecure bool
}

// grpcOptions returns the server and dial options of the remote: both
// sides present a certificate and require the peer's to chain to the CA.
func (f TLSFiles) grpcOptions() ([]grpc.ServerOption, []grpc.DialOption, error) {
	if f.Insecure {
		return nil, []grpc.DialOption{grpc.WithTransportCredentials(insecure.NewCredentials())}, nil
	}
	if f.CertFile == "" || f.KeyFile == "" || f.CAFile == "" {
		return nil, nil, errors.New("cluster: tls_cert_file, tls_key_file and tls_ca_file are required (mutual TLS between nodes)")
	}
	cert, err := tls.LoadX509KeyPair(f.CertFile, f.KeyFile)
	if err != nil {
		return nil, nil, fmt.Errorf("cluster: the node's certificate and key: %w", err)
	}
	caPEM, err := os.ReadFile(f.CAFile)
	if err != nil {
		return nil, nil, fmt.Errorf("cluster: the CA file: %w", err)
	}
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(caPEM) {
		return nil, nil, errors.New("cluster: tls_ca_file holds no PEM certificate")
	}
	server := &tls.Config{MinVersion: tls.VersionTLS13, Certificates: []tls.Certificate{cert},
		ClientCAs: pool, ClientAuth: tls.RequireAndVerifyClientCert}
	// Nodes dial each other by the address the membership advertises, which
	// may be an IP the certificate does not name: the peer is verified by its
	// chain to the cluster's own CA, not by name (every holder of a node
	// certificate is a node).
	client := &tls.Config{MinVersion: tls.VersionTLS13, Certificates: []tls.Certificate{cert}, RootCAs: pool,
		InsecureSkipVerify: true, VerifyPeerCertificate: verifyChain(pool)}
	return []grpc.ServerOption{grpc.Creds(credentials.NewTLS(server))},
		[]grpc.DialOption{grpc.WithTransportCredentials(credentials.NewTLS(client))}, nil
}

// verifyChain verifies a peer's certificate against the CA alone (no
// host name): what crypto/tls would do with ServerName set to a name the
// certificate holds.
func verifyChain(pool *x509.CertPool) func([][]byte, [][]*x509.Certificate) error {
	return func(raw [][]byte, _ [][]*x509.Certificate) error {
		if len(raw) == 0 {
			return errors.New("the peer sent no certificate")
		}
		certs := make([]*x509.Certificate, len(raw))
		for i, b := range raw {
			c, err := x509.ParseCertificate(b)
			if err != nil {
				return err
			}
			certs[i] = c
		}
		inter := x509.NewCertPool()
		for _, c := range certs[1:] {
			inter.AddCert(c)
		}
		_, err := certs[0].Verify(x509.VerifyOptions{Roots: pool, Intermediates: inter,
			KeyUsages: []x509.ExtKeyUsage{x509.ExtKeyUsageAny}})
		return err
	}
}
