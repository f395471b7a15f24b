package cluster

import (
	"log/slog"

	"troupe/config"
)

// Join makes this process a node of the cluster cfg's [cluster] table
// configures (a provider must be set): Start with the options it names and
// cfg's fingerprint. lost is Options.Lost.
func Join(cfg *config.Config, log, runtimeLog *slog.Logger, lost func(error)) (*Node, error) {
	c := cfg.Cluster
	return Start(Options{
		Name:          c.Name,
		Listen:        c.Listen,
		Advertise:     c.Advertise,
		EtcdEndpoints: c.EtcdEndpoints,
		TLS:           TLSFiles{CertFile: c.TLSCertFile, KeyFile: c.TLSKeyFile, CAFile: c.TLSCAFile, Insecure: c.TLSInsecure},
		Fingerprint:   cfg.ClusterFingerprint(),
		Logger:        log,
		RuntimeLogger: runtimeLog,
		Lost:          lost,
	})
}
