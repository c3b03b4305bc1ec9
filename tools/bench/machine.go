package bench

import (
	"errors"
	"fmt"
	"io"
	"os"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// CPU is what a mode cost the machine's processors: how busy all of them
// were while it ran (Linux's /proc/stat, every process: Postgres, this one,
// anything else), and what one request cost the machine, Postgres's
// processes and this process (the API, the worker, the processor and the
// load generator together). At low concurrency it says whether latency is
// waiting on the processors: a machine near full queues every wakeup of
// every hop. At full load it says whose processor time a request is.
type CPU struct {
	Cores int
	// Busy is the share of all cores' time spent busy.
	Busy float64
	// PerOp is the machine's processor time per request; PostgresPerOp
	// and ProcessPerOp are Postgres's processes' part of it and this
	// process's. PostgresPerOp is zero where no Postgres process runs on
	// this machine (a server elsewhere) or none can be read.
	PerOp, PostgresPerOp, ProcessPerOp time.Duration
	// SwitchesPerOp is the machine's context switches per request: each
	// wakeup of a process or thread that a hop, a round trip or a
	// notification costs.
	SwitchesPerOp float64
}

// procStat is what /proc/stat counts for the whole machine.
type procStat struct {
	// busy and total are all cores' time, busy (all but idle and waiting
	// for I/O) and in all, in ticks.
	busy, total float64
	cores       int
	switches    float64
}

// cpuUse is what the processors' counters moved by between two readings,
// or over several spans of a mode added together (a mode in turns).
type cpuUse struct {
	elapsed  time.Duration
	stat     procStat
	postgres float64 // Postgres's processes, ticks
	self     time.Duration
}

// cpuMeter is a reading of the processors' counters at a mode's start.
type cpuMeter struct {
	at       time.Time
	stat     procStat
	postgres map[proc]float64
	self     time.Duration
	err      error
}

// startCPU reads the counters; stop reads them again.
func startCPU() cpuMeter {
	m := cpuMeter{at: time.Now(), postgres: postgresTicks()}
	m.stat, m.err = readStat()
	if m.err == nil {
		m.self, m.err = processCPU()
	}
	return m
}

// stop returns what the counters moved by since start; an error when they
// cannot be read (no /proc: not Linux).
func (m cpuMeter) stop() (cpuUse, error) {
	if m.err != nil {
		return cpuUse{}, m.err
	}
	elapsed := time.Since(m.at)
	postgres := postgresTicks()
	stat, err := readStat()
	if err != nil {
		return cpuUse{}, err
	}
	self, err := processCPU()
	if err != nil {
		return cpuUse{}, err
	}
	return cpuUse{
		elapsed:  elapsed,
		stat:     procStat{busy: stat.busy - m.stat.busy, total: stat.total - m.stat.total, cores: stat.cores, switches: stat.switches - m.stat.switches},
		postgres: ticksSince(m.postgres, postgres),
		self:     self - m.self,
	}, nil
}

// add adds what another span of the same mode used.
func (u *cpuUse) add(v cpuUse) {
	u.elapsed += v.elapsed
	u.stat.busy += v.stat.busy
	u.stat.total += v.stat.total
	u.stat.switches += v.stat.switches
	u.stat.cores = v.stat.cores
	u.postgres += v.postgres
	u.self += v.self
}

// per returns what each of ops requests cost.
func (u cpuUse) per(ops int) (CPU, error) {
	if ops <= 0 || u.stat.total <= 0 {
		return CPU{}, errors.New("nothing measured")
	}
	c := CPU{Cores: u.stat.cores, Busy: u.stat.busy / u.stat.total}
	c.PerOp = time.Duration(c.Busy * float64(u.stat.cores) * float64(u.elapsed) / float64(ops))
	// A process's ticks are Linux's USER_HZ, 100 a second on every
	// architecture Go runs on.
	c.PostgresPerOp = time.Duration(u.postgres * float64(10*time.Millisecond) / float64(ops))
	c.ProcessPerOp = u.self / time.Duration(ops)
	c.SwitchesPerOp = u.stat.switches / float64(ops)
	return c, nil
}

// readStat reads /proc/stat.
func readStat() (procStat, error) {
	stat, err := os.ReadFile("/proc/stat")
	if err != nil {
		return procStat{}, err
	}
	return parseStat(string(stat))
}

// parseStat reads the text of /proc/stat.
func parseStat(text string) (procStat, error) {
	var s procStat
	for line := range strings.Lines(text) {
		fields := strings.Fields(line)
		switch {
		case len(fields) > 8 && fields[0] == "cpu":
			// user nice system idle iowait irq softirq steal; guest time
			// is counted in user already.
			for i, f := range fields[1:9] {
				v, err := strconv.ParseFloat(f, 64)
				if err != nil {
					return procStat{}, fmt.Errorf("/proc/stat: %w", err)
				}
				s.total += v
				if i != 3 && i != 4 { // idle, iowait
					s.busy += v
				}
			}
		case len(fields) > 0 && strings.HasPrefix(fields[0], "cpu"):
			s.cores++
		case len(fields) == 2 && fields[0] == "ctxt":
			v, err := strconv.ParseFloat(fields[1], 64)
			if err != nil {
				return procStat{}, fmt.Errorf("/proc/stat: %w", err)
			}
			s.switches = v
		}
	}
	if s.total == 0 || s.cores == 0 {
		return procStat{}, errors.New("/proc/stat: no cpu line")
	}
	return s, nil
}

// processCPU is the processor time this process has used, user and system.
func processCPU() (time.Duration, error) {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0, err
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano()), nil
}

// proc names a process across readings: its pid and its start time
// (Linux reuses pids).
type proc struct{ pid, start string }

// postgresTicks is the processor time, user and system, that each process
// named postgres on this machine has used, in ticks: the server and all its
// backends, whoever connected them.
func postgresTicks() map[proc]float64 {
	dirs, err := os.ReadDir("/proc")
	if err != nil {
		return nil
	}
	ticks := map[proc]float64{}
	for _, d := range dirs {
		if _, err := strconv.Atoi(d.Name()); err != nil {
			continue
		}
		stat, err := os.ReadFile("/proc/" + d.Name() + "/stat")
		if err != nil {
			continue // gone, or not ours to read
		}
		if start, t, ok := postgresStat(string(stat)); ok {
			ticks[proc{d.Name(), start}] = t
		}
	}
	return ticks
}

// ticksSince is what the processes read now used since then: a process
// started since counts whole; one that exited since took its time with it
// and is not counted (the modes keep their connections open), so the sum
// never runs backwards when other clients' backends come and go.
func ticksSince(then, now map[proc]float64) float64 {
	var ticks float64
	for p, t := range now {
		ticks += t - then[p]
	}
	return ticks
}

// postgresStat reads a /proc/<pid>/stat line: the process's start time, its
// user and system ticks, and whether it is a Postgres process.
func postgresStat(line string) (start string, ticks float64, ok bool) {
	open, end := strings.IndexByte(line, '('), strings.LastIndexByte(line, ')')
	if open < 0 || end < open || line[open+1:end] != "postgres" {
		return "", 0, false
	}
	// After the name: state, then ppid and the rest; utime and stime are
	// the 14th and 15th fields of the line, the 12th and 13th after it,
	// and starttime the 22nd, the 20th after it.
	fields := strings.Fields(line[end+1:])
	if len(fields) < 20 {
		return "", 0, false
	}
	utime, err1 := strconv.ParseFloat(fields[11], 64)
	stime, err2 := strconv.ParseFloat(fields[12], 64)
	if err1 != nil || err2 != nil {
		return "", 0, false
	}
	return fields[19], utime + stime, true
}

// PrintCPU writes what mode cost the machine's processors.
func PrintCPU(out io.Writer, mode string, c CPU) {
	postgres := ""
	if c.PostgresPerOp > 0 {
		postgres = fmt.Sprintf(" Postgres's processes %.2f ms,", msOf(c.PostgresPerOp))
	}
	fmt.Fprintf(out, "%s: the machine's %d cores were %.0f%% busy; a request cost %.2f ms of their time:%s this process's %.2f ms (the API, the worker, the processor and the load generator); and %.0f context switches\n",
		mode, c.Cores, 100*c.Busy, msOf(c.PerOp), postgres, msOf(c.ProcessPerOp), c.SwitchesPerOp)
}

func msOf(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }
