package audit

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
)

// rotatedName is the name of the n-th rotated file of the log at path:
// PATH.1 is the newest.
func rotatedName(path string, n int) string { return path + "." + strconv.Itoa(n) }

// rotatedNumbers returns the n of every PATH.n beside the log at path,
// highest (oldest) first. Only plain decimal suffixes count (no sign, no
// leading zero), so that a name maps to one n and back.
func rotatedNumbers(path string) ([]int, error) {
	entries, err := os.ReadDir(filepath.Dir(path))
	if err != nil {
		return nil, err
	}
	prefix := filepath.Base(path) + "."
	var nums []int
	for _, e := range entries {
		suffix, ok := strings.CutPrefix(e.Name(), prefix)
		if !ok || suffix == "" || suffix[0] < '1' || suffix[0] > '9' || e.IsDir() {
			continue
		}
		if n, err := strconv.Atoi(suffix); err == nil && strconv.Itoa(n) == suffix {
			nums = append(nums, n)
		}
	}
	slices.Sort(nums)
	slices.Reverse(nums)
	return nums, nil
}

// Files returns the files that hold the log at path, in the chain's
// order: the rotated files from the oldest (the highest PATH.n) to PATH.1,
// then path itself. Files that do not exist are left out (path too, if a
// crash came between a rotation's rename and the next append); a log
// with no file at all is an error wrapping fs.ErrNotExist.
func Files(path string) ([]string, error) {
	nums, err := rotatedNumbers(path)
	if err != nil && !errors.Is(err, fs.ErrNotExist) {
		return nil, fmt.Errorf("audit %s: %w", path, err)
	}
	files := make([]string, 0, len(nums)+1)
	for _, n := range nums {
		files = append(files, rotatedName(path, n))
	}
	switch _, err := os.Stat(path); {
	case err == nil:
		files = append(files, path)
	case !errors.Is(err, fs.ErrNotExist) || len(files) == 0:
		return nil, fmt.Errorf("audit: %w", err)
	}
	return files, nil
}

// rotate renames the log's file to PATH.1, after moving each PATH.n to
// PATH.n+1 (from the oldest down, so that no rename lands on a file still
// to be moved) and deleting those that would pass MaxFiles. The caller
// holds the file's lock: every other appender, here or in another process,
// waits for it and then finds that the path names another file (lock), so
// nothing is written to a file once it is rotated. The rename of the log
// itself comes last, so that whoever finds the path empty and chains to
// PATH.1 (tail) finds the rotated file there, complete.
func (l *Log) rotate() error {
	nums, err := rotatedNumbers(l.path)
	if err != nil {
		return err
	}
	keep := max(l.opts.MaxFiles, 1)
	for _, n := range nums {
		old := rotatedName(l.path, n)
		if n >= keep {
			if err := os.Remove(old); err != nil && !errors.Is(err, fs.ErrNotExist) {
				return err
			}
			continue
		}
		if err := os.Rename(old, rotatedName(l.path, n+1)); err != nil {
			return err
		}
	}
	if err := os.Rename(l.path, rotatedName(l.path, 1)); err != nil {
		return err
	}
	if l.opts.NoSync {
		return nil
	}
	// The renames reach the disk before the new file's first record.
	d, err := os.Open(filepath.Dir(l.path))
	if err != nil {
		return err
	}
	defer d.Close()
	return d.Sync()
}

// lastHashOf returns the hash of the last complete record of the file at
// path, "" when it does not exist or holds none. The caller holds the lock
// of the log the file was rotated from, so no rotation moves it meanwhile.
func lastHashOf(path string) (string, error) {
	f, err := os.Open(path)
	if errors.Is(err, fs.ErrNotExist) {
		return "", nil
	}
	if err != nil {
		return "", fmt.Errorf("audit %s: %w", path, err)
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return "", fmt.Errorf("audit %s: %w", path, err)
	}
	prev, _, err := lastHash(f, fi.Size())
	if err != nil {
		return "", fmt.Errorf("audit %s: %w", path, err)
	}
	return prev, nil
}
