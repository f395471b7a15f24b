package app

import (
	"log/slog"

	"troupe/audit"
	"troupe/config"
)

// openAudit opens the audit log [audit] asks for; nil when it is off.
func openAudit(cfg *config.Config, log *slog.Logger) (*audit.Log, error) {
	if !cfg.Audit.Enabled {
		log.Warn("the audit log is off ([audit] enabled = false)")
		return nil, nil
	}
	path, err := cfg.AuditFile()
	if err != nil {
		return nil, err
	}
	l, err := audit.Open(path, audit.Options{MaxBytes: cfg.Audit.MaxBytes, MaxFiles: cfg.Audit.MaxFiles})
	if err != nil {
		return nil, err
	}
	log.Info("audit log", "path", path, "max_bytes", cfg.Audit.MaxBytes, "max_files", cfg.Audit.MaxFiles)
	return l, nil
}
