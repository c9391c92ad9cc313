package main

import (
	"os"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// cpuUse is CPU time used so far: by this process (connstore or River, and
// the bench's own polling) and by the PostgreSQL server's processes on this
// machine (every backend and background process, autovacuum included: both
// sides pay theirs). The server's share is read from /proc, so it is only
// known for a local server on Linux; it is zero otherwise.
type cpuUse struct{ client, server time.Duration }

// cpuNow reads the CPU used so far.
func cpuNow() cpuUse {
	var ru syscall.Rusage
	_ = syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	return cpuUse{client: time.Duration(ru.Utime.Nano() + ru.Stime.Nano()), server: serverCPU()}
}

func (c cpuUse) sub(d cpuUse) cpuUse {
	return cpuUse{client: c.client - d.client, server: c.server - d.server}
}

// clockTicks is the kernel's USER_HZ, the unit of /proc's CPU times: 100
// on every Linux architecture Go supports.
const clockTicks = 100

// serverCPU sums the user and system time of every process named
// "postgres" (the postmaster and the processes it forks).
func serverCPU() time.Duration {
	ents, err := os.ReadDir("/proc")
	if err != nil {
		return 0
	}
	var ticks int64
	for _, e := range ents {
		if _, err := strconv.Atoi(e.Name()); err != nil {
			continue
		}
		b, err := os.ReadFile("/proc/" + e.Name() + "/stat")
		if err != nil {
			continue
		}
		s := string(b)
		open, end := strings.IndexByte(s, '('), strings.LastIndexByte(s, ')')
		if open < 0 || end < open || s[open+1:end] != "postgres" {
			continue
		}
		// After the command: state, then 10 fields, then utime and stime.
		f := strings.Fields(s[end+1:])
		if len(f) < 13 {
			continue
		}
		u, _ := strconv.ParseInt(f[11], 10, 64)
		k, _ := strconv.ParseInt(f[12], 10, 64)
		ticks += u + k
	}
	return time.Duration(ticks) * time.Second / clockTicks
}
