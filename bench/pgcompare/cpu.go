package main

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// The CPU a run costs each side, read from Linux's /proc: the
// benchmark's process (the client: the library, its driver and the
// benchmark's own goroutines) and the cluster's processes (the server:
// the postmaster and every process it started, those that ended during
// the run included through the postmaster's children's times). A job's
// CPU is less noisy than its rate on a shared machine, and both sides
// share the machine's cores: a rate moves with their sum.

// userHZ is the unit of the times in /proc/<pid>/stat on Linux.
const userHZ = 100

// cpuMeter reads the CPU time used so far by the client and the server.
type cpuMeter struct {
	postmaster int // 0: the server's processes cannot be read
}

// newCPUMeter returns a meter of the cluster whose data directory is
// dataDir; without /proc or the cluster's postmaster.pid, it measures
// the client alone.
func newCPUMeter(dataDir string) cpuMeter {
	b, err := os.ReadFile(filepath.Join(dataDir, "postmaster.pid"))
	if err != nil {
		return cpuMeter{}
	}
	first, _, _ := strings.Cut(string(b), "\n")
	pid, err := strconv.Atoi(strings.TrimSpace(first))
	if err != nil {
		return cpuMeter{}
	}
	if _, _, _, err := procStat(pid); err != nil {
		return cpuMeter{}
	}
	return cpuMeter{postmaster: pid}
}

// cpuTimes is a reading: the client's and the server's CPU time so far
// (server is negative when it cannot be read), and the bytes and objects
// the client's heap allocated so far.
type cpuTimes struct {
	client, server time.Duration
	bytes, objects uint64
}

func (m cpuMeter) read() cpuTimes {
	var ru syscall.Rusage
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	out := cpuTimes{server: -1, bytes: ms.TotalAlloc, objects: ms.Mallocs}
	if syscall.Getrusage(syscall.RUSAGE_SELF, &ru) == nil {
		out.client = time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
	}
	if m.postmaster == 0 {
		return out
	}
	own, children, _, err := procStat(m.postmaster)
	if err != nil {
		return out
	}
	ticks := own + children
	entries, err := os.ReadDir("/proc")
	if err != nil {
		return out
	}
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		t, _, ppid, err := procStat(pid)
		if err != nil || ppid != m.postmaster {
			continue
		}
		ticks += t
	}
	out.server = time.Duration(ticks) * time.Second / userHZ
	return out
}

// procStat returns a process's CPU time (user and system) and its
// waited-for children's, in ticks, and its parent's pid.
func procStat(pid int) (own, children int64, ppid int, err error) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0, 0, 0, err
	}
	return parseStat(string(b))
}

// parseStat reads what procStat returns from the text of a
// /proc/<pid>/stat file.
func parseStat(s string) (own, children int64, ppid int, err error) {
	// The command name, in parentheses, may hold spaces and parentheses:
	// the fields counted start after its last closing parenthesis (field
	// 3, the state).
	i := strings.LastIndexByte(s, ')')
	if i < 0 {
		return 0, 0, 0, errors.New("stat: no command name")
	}
	f := strings.Fields(s[i+1:])
	if len(f) < 15 {
		return 0, 0, 0, fmt.Errorf("stat: %d fields after the command name", len(f))
	}
	num := func(k int) int64 { // field k of stat(5), k >= 3
		v, _ := strconv.ParseInt(f[k-3], 10, 64)
		return v
	}
	return num(14) + num(15), num(16) + num(17), int(num(4)), nil
}

// perJob is the CPU between two readings per job of n, in µs; server is
// negative when it could not be read.
func perJob(a, b cpuTimes, n int) (client, server float64) {
	client = float64(b.client-a.client) / float64(time.Microsecond) / float64(n)
	server = -1
	if a.server >= 0 && b.server >= 0 {
		server = float64(b.server-a.server) / float64(time.Microsecond) / float64(n)
	}
	return client, server
}

// allocPerJob is what the client's heap allocated between two readings
// per job of n: kilobytes and objects.
func allocPerJob(a, b cpuTimes, n int) (kb, objects float64) {
	return float64(b.bytes-a.bytes) / 1024 / float64(n), float64(b.objects-a.objects) / float64(n)
}

// allocRow is the allocation table's row of a worker count: the medians
// of the runs' allocations per job (jobstate KB, objects; river KB,
// objects).
func allocRow(workers int, alloc [4][]float64) string {
	return fmt.Sprintf("| %d | %s | %s | %s | %s |\n", workers,
		spread(alloc[0], "%.1f"), spread(alloc[1], "%.0f"), spread(alloc[2], "%.1f"), spread(alloc[3], "%.0f"))
}

// cpuTable prints a table of cpuRow rows under its title; head and align
// are the first column's header and alignment cells.
func cpuTable(rep *report, title, head, align string, rows []string) {
	rep.printf("\n%s in the same runs, µs (client: this process; server: the cluster's processes; read from /proc):\n\n", title)
	rep.printf("%s jobstate client | jobstate server | river client | river server | jobstate/river, both sides |\n", head)
	rep.printf("%s---:|---:|---:|---:|---:|\n", align)
	for _, row := range rows {
		rep.printf("%s", row)
	}
}

// cpuRow is the CPU table's row labelled label (a worker count, a way
// of inserting): the medians of the runs' CPU per job (jobstate client,
// server; river client, server).
func cpuRow(label string, cpu [4][]float64) string {
	cell := func(v []float64) string {
		if len(v) == 0 || slices.Min(v) < 0 {
			return "n/a"
		}
		return spread(v, "%.0f")
	}
	ratio := "n/a"
	if len(cpu[1]) > 0 && slices.Min(cpu[1]) >= 0 && slices.Min(cpu[3]) >= 0 {
		ratio = fmt.Sprintf("%.2f", (median(cpu[0])+median(cpu[1]))/(median(cpu[2])+median(cpu[3])))
	}
	return fmt.Sprintf("| %s | %s | %s | %s | %s | %s |\n", label, cell(cpu[0]), cell(cpu[1]), cell(cpu[2]), cell(cpu[3]), ratio)
}
