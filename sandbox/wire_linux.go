package sandbox

import (
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"os"
	"time"

	"golang.org/x/sys/unix"
)

// The helper's config on the wire.
//
// The server starts the helper first and then, while the helper's Go
// runtime starts, makes the run's temp dir and cgroups and sends the
// helperConfig over a socket (configSocket), with the cgroups'
// cgroup.procs fds attached (SCM_RIGHTS): they did not exist when the
// helper was forked. The helper reads the socket to its end
// (receiveConfig).
//
// Decoding JSON took the helper, a fresh process whose encoding/json and
// reflect code are not even paged in yet, a sixth of a millisecond on
// every run. So the config travels in a plain form of its own: the
// fields in a fixed order, integers as varints, strings length-prefixed.
// Both ends come from one build (HelperProtocol changes with this
// format), so there are no field names or versions in it; a decoder that
// does not end exactly at the end of its input refuses it.

// maxConfigFDs bounds the fds a config may carry: the memory and pids
// cgroups' cgroup.procs.
const maxConfigFDs = 2

// configSocket makes the config channel: conn is the server's end
// (non-blocking, so that sendConfig's deadline holds), child the
// helper's (blocking). Both are close-on-exec.
func configSocket() (conn, child *os.File, err error) {
	fds, err := unix.Socketpair(unix.AF_UNIX, unix.SOCK_STREAM|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		return nil, nil, fmt.Errorf("config socket: %w", err)
	}
	if err := unix.SetNonblock(fds[0], true); err != nil {
		unix.Close(fds[0])
		unix.Close(fds[1])
		return nil, nil, fmt.Errorf("config socket: %w", err)
	}
	return os.NewFile(uintptr(fds[0]), "sandbox-config"), os.NewFile(uintptr(fds[1]), "sandbox-config"), nil
}

// sendConfig writes data to conn with files attached to its first bytes,
// giving up at deadline.
func sendConfig(conn *os.File, data []byte, files []*os.File, deadline time.Time) error {
	var oob []byte
	if len(files) > 0 {
		fds := make([]int, len(files))
		for i, f := range files {
			fds[i] = int(f.Fd())
		}
		oob = unix.UnixRights(fds...)
	}
	if err := conn.SetWriteDeadline(deadline); err != nil {
		return err
	}
	rc, err := conn.SyscallConn()
	if err != nil {
		return err
	}
	var serr error
	werr := rc.Write(func(fd uintptr) bool {
		for len(data) > 0 {
			var n int
			n, serr = unix.SendmsgN(int(fd), data, oob, nil, 0)
			if errors.Is(serr, unix.EAGAIN) {
				return false // wait until the helper has read
			}
			if serr != nil {
				return true
			}
			data, oob = data[n:], nil // the fds went with the first bytes
		}
		return true
	})
	return errors.Join(werr, serr)
}

// receiveConfig reads the config socket fd to its end and returns the
// data and the fds that came with it (close-on-exec).
func receiveConfig(fd int) (data []byte, fds []int, err error) {
	buf := make([]byte, 16<<10)
	oob := make([]byte, unix.CmsgSpace(4*maxConfigFDs))
	var n, oobn, flags int
	for {
		n, oobn, flags, _, err = unix.Recvmsg(fd, buf, oob, unix.MSG_CMSG_CLOEXEC)
		if !errors.Is(err, unix.EINTR) {
			break
		}
	}
	if err != nil {
		return nil, nil, fmt.Errorf("read config: %w", err)
	}
	if oobn > 0 {
		msgs, err := unix.ParseSocketControlMessage(oob[:oobn])
		if err != nil {
			return nil, nil, fmt.Errorf("read config: %w", err)
		}
		for _, m := range msgs {
			got, err := unix.ParseUnixRights(&m)
			if err != nil {
				return nil, nil, fmt.Errorf("read config: %w", err)
			}
			fds = append(fds, got...)
		}
	}
	if flags&unix.MSG_CTRUNC != 0 {
		return nil, fds, errors.New("read config: more fds than expected")
	}
	rest, err := readFD(fd)
	if err != nil {
		return nil, fds, fmt.Errorf("read config: %w", err)
	}
	return append(buf[:n], rest...), fds, nil
}

// wireWriter appends values to buf.
type wireWriter struct{ buf []byte }

func (w *wireWriter) int(v int64) { w.buf = binary.AppendVarint(w.buf, v) }

func (w *wireWriter) bool(v bool) {
	if v {
		w.buf = append(w.buf, 1)
	} else {
		w.buf = append(w.buf, 0)
	}
}

func (w *wireWriter) string(s string) {
	w.buf = binary.AppendUvarint(w.buf, uint64(len(s)))
	w.buf = append(w.buf, s...)
}

func (w *wireWriter) strings(ss []string) {
	w.buf = binary.AppendUvarint(w.buf, uint64(len(ss)))
	for _, s := range ss {
		w.string(s)
	}
}

// wireReader reads what a wireWriter wrote; the first error sticks and
// later reads return zero values.
type wireReader struct {
	buf []byte
	err error
}

var errWire = errors.New("malformed helper config")

func (r *wireReader) fail() { r.err, r.buf = errWire, nil }

func (r *wireReader) int64() int64 {
	v, n := binary.Varint(r.buf)
	if n <= 0 {
		r.fail()
		return 0
	}
	r.buf = r.buf[n:]
	return v
}

// int reads an int64 that must fit an int.
func (r *wireReader) int() int {
	v := r.int64()
	if v < math.MinInt || v > math.MaxInt {
		r.fail()
		return 0
	}
	return int(v)
}

func (r *wireReader) bool() bool {
	if len(r.buf) == 0 || r.buf[0] > 1 {
		r.fail()
		return false
	}
	v := r.buf[0] == 1
	r.buf = r.buf[1:]
	return v
}

// count reads a length, which cannot exceed what is left to read (each
// element takes at least a byte).
func (r *wireReader) count() int {
	n, k := binary.Uvarint(r.buf)
	if k <= 0 || n > uint64(len(r.buf)-k) {
		r.fail()
		return 0
	}
	r.buf = r.buf[k:]
	return int(n)
}

func (r *wireReader) string() string {
	n := r.count()
	s := string(r.buf[:n])
	r.buf = r.buf[n:]
	return s
}

func (r *wireReader) strings() []string {
	n := r.count()
	if n == 0 {
		return nil
	}
	ss := make([]string, n)
	for i := range ss {
		ss[i] = r.string()
	}
	return ss
}

// marshal is the config's wire form.
func (c *helperConfig) marshal() []byte {
	w := &wireWriter{buf: make([]byte, 0, 1024)}
	w.string(c.Path)
	w.strings(c.Args)
	w.strings(c.Env)
	w.string(c.Workspace)
	w.string(c.TempDir)
	w.strings(c.Writable)
	w.bool(c.Network)
	w.int(int64(c.Limits.MaxProcesses))
	w.int(c.Limits.MaxFileBytes)
	w.int(int64(c.Limits.MaxOpenFiles))
	w.int(int64(c.Limits.CPUSeconds))
	w.int(c.Limits.MaxMemoryBytes)
	w.int(int64(c.LandlockABI))
	w.int(int64(c.NProc))
	w.int(int64(c.FirstPrivateFD))
	w.int(int64(c.Cgroups))
	w.int(int64(c.NetNS))
	w.int(int64(c.IPCNS))
	w.bool(c.Mounts != nil)
	if c.Mounts != nil {
		w.strings(c.Mounts.Writable)
		w.strings(c.Mounts.Hidden)
		w.bool(c.Mounts.Private)
		w.bool(c.Mounts.NoDev)
		w.int(int64(c.Mounts.Proc))
		w.string(c.Mounts.Tmp)
	}
	w.bool(c.DenyMetadata)
	w.bool(c.Init)
	w.bool(c.ReadOnly)
	w.strings(c.Runtime)
	w.bool(c.UserNS)
	w.bool(c.Reaper)
	return w.buf
}

// unmarshal reads what marshal wrote.
func (c *helperConfig) unmarshal(data []byte) error {
	r := &wireReader{buf: data}
	*c = helperConfig{
		Path:      r.string(),
		Args:      r.strings(),
		Env:       r.strings(),
		Workspace: r.string(),
		TempDir:   r.string(),
		Writable:  r.strings(),
		Network:   r.bool(),
	}
	c.Limits = Limits{
		MaxProcesses:   r.int(),
		MaxFileBytes:   r.int64(),
		MaxOpenFiles:   r.int(),
		CPUSeconds:     r.int(),
		MaxMemoryBytes: r.int64(),
	}
	c.LandlockABI = r.int()
	c.NProc = r.int()
	c.FirstPrivateFD = r.int()
	c.Cgroups = r.int()
	c.NetNS = r.int()
	c.IPCNS = r.int()
	if r.bool() {
		c.Mounts = &mountView{Writable: r.strings(), Hidden: r.strings(), Private: r.bool(), NoDev: r.bool(), Proc: procMode(r.int()), Tmp: r.string()}
	}
	c.DenyMetadata = r.bool()
	c.Init = r.bool()
	c.ReadOnly = r.bool()
	c.Runtime = r.strings()
	c.UserNS = r.bool()
	c.Reaper = r.bool()
	if r.err == nil && len(r.buf) != 0 {
		r.err = fmt.Errorf("%w: %d bytes past its end", errWire, len(r.buf))
	}
	return r.err
}
