package sandbox

import (
	"bytes"
	"math"
	"os"
	"path/filepath"
	"reflect"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// TestHelperConfigWire: a config survives the trip through the pipe's
// form, every field of it, and anything but a whole config is refused.
func TestHelperConfigWire(t *testing.T) {
	full := helperConfig{
		Path:      "/bin/sh",
		Args:      []string{"sh", "-c", "echo ü; exit 3", ""},
		Env:       []string{"A=1", "B=", "TMPDIR=/tmp/troupe-0/run-1-x"},
		Workspace: "/work space",
		TempDir:   "/tmp/troupe-0/run-1-x",
		Writable:  []string{"/var/lib/troupe/codex/s1"},
		Network:   true,
		Limits: Limits{MaxProcesses: 256, MaxFileBytes: math.MaxInt64, MaxOpenFiles: 1024,
			CPUSeconds: 7, MaxMemoryBytes: 4 << 30},
		LandlockABI:    7,
		NProc:          64,
		FirstPrivateFD: 5,
		Cgroups:        2,
		NetNS:          9,
		IPCNS:          10,
		Mounts:         &mountView{Writable: []string{"/w", "/t"}, Hidden: []string{"/h"}, Private: true, NoDev: true, Proc: procKeep, Tmp: "/tmp"},
		DenyMetadata:   true,
		Init:           true,
		ReadOnly:       true,
		Runtime:        []string{"/bin/sh", "/lib/ld.so"},
		UserNS:         true,
		Reaper:         true,
	}
	// Each field set alone, so that no field's value hides another's
	// position.
	configs := []helperConfig{{}, full}
	v := reflect.ValueOf(full)
	for i := range v.NumField() {
		if v.Type().Field(i).Name == "CgroupFDs" {
			continue // the helper's own: the fds come beside the data
		}
		var one helperConfig
		reflect.ValueOf(&one).Elem().Field(i).Set(v.Field(i))
		configs = append(configs, one)
	}
	for _, c := range configs {
		data := c.marshal()
		var got helperConfig
		if err := got.unmarshal(data); err != nil {
			t.Fatalf("%+v: %v", c, err)
		}
		if !reflect.DeepEqual(got, c) {
			t.Fatalf("round trip:\n got %+v\nwant %+v", got, c)
		}
		for n := range len(data) {
			if err := got.unmarshal(data[:n]); err == nil {
				t.Fatalf("%d of %d bytes accepted", n, len(data))
			}
		}
		if err := got.unmarshal(append(data, 0)); err == nil {
			t.Fatal("a trailing byte accepted")
		}
	}
}

// FuzzHelperConfigWire: no input makes the helper's decoder panic or
// allocate without bound.
func FuzzHelperConfigWire(f *testing.F) {
	f.Add((&helperConfig{Path: "/bin/true", Args: []string{"true"}}).marshal())
	f.Add([]byte{0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x01})
	f.Fuzz(func(t *testing.T, data []byte) {
		var c helperConfig
		if c.unmarshal(data) == nil && !reflect.DeepEqual(c.marshal(), data) {
			// Varints have one shortest form; others decode too, so
			// only check that what was accepted round-trips.
			var again helperConfig
			if err := again.unmarshal(c.marshal()); err != nil || !reflect.DeepEqual(again, c) {
				t.Fatalf("accepted %x as %+v, which does not round-trip", data, c)
			}
		}
	})
}

// TestConfigSocket: the config arrives whole however large, with the
// files sent beside it; more files than a config may carry are refused.
func TestConfigSocket(t *testing.T) {
	dir := t.TempDir()
	var files []*os.File
	for _, name := range []string{"a", "b", "c"} {
		f, err := os.Create(filepath.Join(dir, name))
		if err != nil {
			t.Fatal(err)
		}
		defer f.Close()
		files = append(files, f)
	}
	for _, c := range []struct {
		name  string
		size  int
		files []*os.File
	}{
		{"small", 100, files[:2]},
		{"larger than the socket buffer", 4 << 20, files[:1]},
		{"no files", 10, nil},
		{"too many files", 10, files},
	} {
		t.Run(c.name, func(t *testing.T) {
			conn, child, err := configSocket()
			if err != nil {
				t.Fatal(err)
			}
			defer child.Close()
			data := bytes.Repeat([]byte("x"), c.size)
			sent := make(chan error, 1)
			go func() {
				sent <- sendConfig(conn, data, c.files, time.Now().Add(time.Minute))
				conn.Close()
			}()
			got, fds, err := receiveConfig(int(child.Fd()))
			for _, fd := range fds {
				defer unix.Close(fd)
			}
			if serr := <-sent; serr != nil {
				t.Fatal(serr)
			}
			if len(c.files) > maxConfigFDs {
				if err == nil {
					t.Fatal("too many fds accepted")
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if !bytes.Equal(got, data) {
				t.Fatalf("got %d bytes, sent %d", len(got), len(data))
			}
			if len(fds) != len(c.files) {
				t.Fatalf("got %d fds, sent %d", len(fds), len(c.files))
			}
			for i, fd := range fds {
				var st unix.Stat_t
				if err := unix.Fstat(fd, &st); err != nil {
					t.Fatal(err)
				}
				fi, _ := c.files[i].Stat()
				if st.Ino != fi.Sys().(*syscall.Stat_t).Ino {
					t.Errorf("fd %d is not file %d", fd, i)
				}
				if flags, _ := unix.FcntlInt(uintptr(fd), unix.F_GETFD, 0); flags&unix.FD_CLOEXEC == 0 {
					t.Errorf("received fd %d is not close-on-exec", fd)
				}
			}
		})
	}
}
