package loadgen

import (
	"bytes"
	"errors"
	"os"
	"strconv"
	"time"
)

// What the kernel says about a local server process. Linux only: on
// other systems these fail, and the report leaves the figures out.

// clockTick is USER_HZ, the unit of utime and stime in /proc/PID/stat. It
// is 100 on every mainstream Linux build (reading it needs sysconf, which
// needs cgo).
const clockTick = 10 * time.Millisecond

// procCPU returns the user plus system CPU time pid has used.
func procCPU(pid int) (time.Duration, error) {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return 0, err
	}
	// The command name, in parentheses, may hold spaces: count fields
	// from the last ')'. utime and stime are fields 14 and 15, i.e. the
	// 12th and 13th after the name.
	i := bytes.LastIndexByte(b, ')')
	if i < 0 {
		return 0, errors.New("unexpected /proc/PID/stat")
	}
	f := bytes.Fields(b[i+1:])
	if len(f) < 13 {
		return 0, errors.New("unexpected /proc/PID/stat")
	}
	u, err1 := strconv.ParseInt(string(f[11]), 10, 64)
	s, err2 := strconv.ParseInt(string(f[12]), 10, 64)
	if err1 != nil || err2 != nil {
		return 0, errors.New("unexpected /proc/PID/stat")
	}
	return time.Duration(u+s) * clockTick, nil
}

// procRSS returns pid's resident set size in bytes (VmRSS).
func procRSS(pid int) (int64, error) {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/status")
	if err != nil {
		return 0, err
	}
	for line := range bytes.Lines(b) {
		if v, ok := bytes.CutPrefix(line, []byte("VmRSS:")); ok {
			f := bytes.Fields(v)
			if len(f) == 0 {
				break
			}
			kb, err := strconv.ParseInt(string(f[0]), 10, 64)
			if err != nil {
				break
			}
			return kb * 1024, nil
		}
	}
	return 0, errors.New("no VmRSS in /proc/PID/status")
}
