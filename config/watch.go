package config

import (
	"context"
	"fmt"
	"path/filepath"
	"time"

	"github.com/fsnotify/fsnotify"
)

// Watcher reloads the configuration when its file changes. It watches the
// file's directory, not the file: editors that save by writing a new file
// and renaming it over the old one (or by moving the old one away first)
// replace the inode a file watch would follow. koanf's own watcher stops
// for good on such a save; this one does not.
//
// Nothing a tool run can write may reach a reload: serve refuses to start
// with a config file where runs write (CheckOwnFiles), and the watcher
// checks again, as a second line, before it watches and before it applies
// each reload (a file swapped for a symlink into the workspace later).
type Watcher struct {
	opts     Options
	file     string
	writable RunWritable
	debounce time.Duration
	apply    func(*Config)
	fail     func(error)
	reload   chan struct{}
	fw       *fsnotify.Watcher // the file's directory, watched from Open on
}

// NewWatcher prepares to reload with opts (the same options the first Load
// used) whenever cfg.File changes or Reload is called. apply gets each new
// configuration that loads and validates and whose file no run could have
// written (writable: where runs write); fail gets the error of one that
// does not (the last good one stays in force). debounce merges the bursts
// of events one save makes (0: 200 ms).
func NewWatcher(cfg *Config, opts Options, writable RunWritable, debounce time.Duration, apply func(*Config), fail func(error)) *Watcher {
	if debounce <= 0 {
		debounce = 200 * time.Millisecond
	}
	if cfg.File != "" {
		opts.File = cfg.File // keep reading the file that was found at start
	}
	return &Watcher{opts: opts, file: cfg.File, writable: writable, debounce: debounce, apply: apply, fail: fail,
		reload: make(chan struct{}, 1)}
}

// Reload asks for a reload now (SIGHUP).
func (w *Watcher) Reload() {
	select {
	case w.reload <- struct{}{}:
	default:
	}
}

// Open starts watching the config file's directory, so that an edit made
// from now on is seen, however long it is until Run reads the events (the
// server opens the watch before it serves, and runs it after). It refuses
// to watch a config file a run could write. Without a config file it does
// nothing. Run opens the watch itself when Open was not called; a Watcher
// that was opened must be Run (or Closed) to release it.
func (w *Watcher) Open() error {
	if w.file == "" || w.fw != nil {
		return nil
	}
	if err := w.writable.checkConfigFile(w.file); err != nil {
		return fmt.Errorf("not watching the config file: %w", err)
	}
	fw, err := fsnotify.NewWatcher()
	if err != nil {
		return fmt.Errorf("watch %s: %w", w.file, err)
	}
	if err := fw.Add(filepath.Dir(w.file)); err != nil {
		fw.Close()
		return fmt.Errorf("watch %s: %w", w.file, err)
	}
	w.fw = fw
	return nil
}

// Close releases an opened watch that will not be Run.
func (w *Watcher) Close() {
	if w.fw != nil {
		w.fw.Close()
		w.fw = nil
	}
}

// Run watches until ctx ends. Without a config file it only serves Reload.
// It refuses (returns an error at once) to watch a config file a run could
// write.
func (w *Watcher) Run(ctx context.Context) error {
	var events chan fsnotify.Event
	var errs chan error
	if err := w.Open(); err != nil {
		return err
	}
	if w.fw != nil {
		defer w.Close()
		events, errs = w.fw.Events, w.fw.Errors
	}
	name := filepath.Clean(w.file)
	timer := time.NewTimer(time.Hour)
	timer.Stop()
	defer timer.Stop()
	for {
		select {
		case <-ctx.Done():
			return nil
		case ev := <-events:
			if filepath.Clean(ev.Name) == name && ev.Op&(fsnotify.Write|fsnotify.Create|fsnotify.Rename|fsnotify.Remove) != 0 {
				timer.Reset(w.debounce)
			}
		case err := <-errs:
			w.fail(fmt.Errorf("watching %s: %w", w.file, err))
		case <-w.reload:
			timer.Reset(0)
		case <-timer.C:
			cfg, err := Load(w.opts)
			if err != nil {
				w.fail(err) // e.g. the file is half-written or gone for a moment: the next event retries
				continue
			}
			if cfg.File != "" {
				if err := w.writable.checkConfigFile(cfg.File); err != nil {
					w.fail(fmt.Errorf("not reloading: %w", err))
					continue
				}
			}
			w.apply(cfg)
		}
	}
}
