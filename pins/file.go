package pins

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"time"

	"github.com/fsnotify/fsnotify"

	"troupe/internal/flock"
)

// Store is where the pins live. Update is a read-modify-write that no
// other writer (another process, another node) interleaves with.
type Store interface {
	// Load reads the pins; a store that holds none yet gives an empty Doc.
	Load(ctx context.Context) (*Doc, error)
	// Update reads the pins, lets change edit them and writes the result;
	// change returning false writes nothing. It returns the Doc as stored.
	Update(ctx context.Context, change func(*Doc) (bool, error)) (*Doc, error)
	// Watch calls changed (from its own goroutine) after the pins may have
	// changed under troupe (another process accepted a version), until
	// ctx ends; it returns when it can watch no longer.
	Watch(ctx context.Context, changed func()) error
}

// FileStore keeps the pins in a JSON file, rewritten whole (a temporary
// file renamed over it, so a reader never sees half a file) under a
// flock(2) of Path+".lock", so a server and `troupe tools --accept` take
// turns. The file and its lock are created 0600 in a 0700 directory: they
// are troupe's own (config.CheckOwnFiles refuses them where runs write,
// and runs do not see them).
type FileStore struct {
	// Path is the pins file.
	Path string
}

// Load reads the file; a missing file is an empty Doc.
func (f FileStore) Load(context.Context) (*Doc, error) {
	return f.read()
}

func (f FileStore) read() (*Doc, error) {
	b, err := os.ReadFile(f.Path)
	if errors.Is(err, fs.ErrNotExist) {
		return &Doc{Version: docVersion}, nil
	}
	if err != nil {
		return nil, fmt.Errorf("pins: %w", err)
	}
	return decode(f.Path, b)
}

// decode reads a Doc written by this or an older troupe.
func decode(where string, b []byte) (*Doc, error) {
	d := &Doc{}
	if len(bytes.TrimSpace(b)) == 0 {
		return &Doc{Version: docVersion}, nil
	}
	dec := json.NewDecoder(bytes.NewReader(b))
	if err := dec.Decode(d); err != nil {
		return nil, fmt.Errorf("pins: %s is not a pins file: %w", where, err)
	}
	if d.Version > docVersion {
		return nil, fmt.Errorf("pins: %s has format %d; this troupe reads up to %d", where, d.Version, docVersion)
	}
	d.Version = docVersion
	return d, nil
}

// Update rewrites the file under its lock.
func (f FileStore) Update(_ context.Context, change func(*Doc) (bool, error)) (*Doc, error) {
	dir := filepath.Dir(f.Path)
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, fmt.Errorf("pins: %w", err)
	}
	lock, err := os.OpenFile(f.Path+".lock", os.O_RDWR|os.O_CREATE, 0o600)
	if err != nil {
		return nil, fmt.Errorf("pins: %w", err)
	}
	defer lock.Close()
	if err := flock.Lock(lock); err != nil {
		return nil, fmt.Errorf("pins: locking %s: %w", lock.Name(), err)
	}
	defer flock.Unlock(lock)
	d, err := f.read()
	if err != nil {
		return nil, err
	}
	write, err := change(d)
	if err != nil || !write {
		return d, err
	}
	b, err := json.MarshalIndent(d, "", "  ")
	if err != nil {
		return nil, fmt.Errorf("pins: %w", err)
	}
	return d, writeAtomic(f.Path, append(b, '\n'))
}

// writeAtomic replaces path with b: a temporary file beside it, synced,
// renamed over it, and the directory synced.
func writeAtomic(path string, b []byte) error {
	tmp, err := os.CreateTemp(filepath.Dir(path), "."+filepath.Base(path)+".*")
	if err != nil {
		return fmt.Errorf("pins: %w", err)
	}
	done := false
	defer func() {
		if !done {
			tmp.Close()
			os.Remove(tmp.Name())
		}
	}()
	if _, err := tmp.Write(b); err != nil {
		return fmt.Errorf("pins: writing %s: %w", path, err)
	}
	if err := tmp.Sync(); err != nil {
		return fmt.Errorf("pins: writing %s: %w", path, err)
	}
	if err := tmp.Close(); err != nil {
		return fmt.Errorf("pins: writing %s: %w", path, err)
	}
	if err := os.Rename(tmp.Name(), path); err != nil {
		return fmt.Errorf("pins: writing %s: %w", path, err)
	}
	done = true
	if d, err := os.Open(filepath.Dir(path)); err == nil {
		_ = d.Sync()
		d.Close()
	}
	return nil
}

// watchDebounce gathers the events of one rewrite (create, write, rename)
// into one call.
const watchDebounce = 100 * time.Millisecond

// Watch watches the file's directory (a rename replaces the file, so the
// file itself cannot be watched) and calls changed after the file was
// written, removed or renamed, once per burst of events.
func (f FileStore) Watch(ctx context.Context, changed func()) error {
	dir := filepath.Dir(f.Path)
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return fmt.Errorf("pins: %w", err)
	}
	w, err := fsnotify.NewWatcher()
	if err != nil {
		return fmt.Errorf("pins: watching %s: %w", f.Path, err)
	}
	defer w.Close()
	if err := w.Add(dir); err != nil {
		return fmt.Errorf("pins: watching %s: %w", f.Path, err)
	}
	timer := time.NewTimer(time.Hour)
	timer.Stop()
	defer timer.Stop()
	for {
		select {
		case <-ctx.Done():
			return nil
		case ev, ok := <-w.Events:
			if !ok {
				return errors.New("pins: the file watcher stopped")
			}
			if filepath.Clean(ev.Name) == filepath.Clean(f.Path) {
				timer.Reset(watchDebounce)
			}
		case err, ok := <-w.Errors:
			if !ok {
				return errors.New("pins: the file watcher stopped")
			}
			// An overflow may have dropped the rename: look again.
			_ = err
			timer.Reset(watchDebounce)
		case <-timer.C:
			changed()
		}
	}
}
