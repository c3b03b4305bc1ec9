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
// anything else), and what one request cost the machine and this process
// (the API, the worker, the processor and the load generator together). At
// low concurrency it says whether latency is waiting on the processors: a
// machine near full queues every wakeup of every hop.
type CPU struct {
	Cores int
	// Busy is the share of all cores' time spent busy.
	Busy float64
	// PerOp is the machine's processor time per request; ProcessPerOp
	// this process's part of it.
	PerOp, ProcessPerOp time.Duration
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

// cpuMeter is a reading of the processors' counters at a mode's start.
type cpuMeter struct {
	at   time.Time
	stat procStat
	self time.Duration
	err  error
}

// startCPU reads the counters; stop reads them again.
func startCPU() cpuMeter {
	m := cpuMeter{at: time.Now()}
	m.stat, m.err = readStat()
	if m.err == nil {
		m.self, m.err = processCPU()
	}
	return m
}

// stop returns what the ops requests done since start cost; an error when
// the counters cannot be read (no /proc: not Linux).
func (m cpuMeter) stop(ops int) (CPU, error) {
	if m.err != nil {
		return CPU{}, m.err
	}
	elapsed := time.Since(m.at)
	stat, err := readStat()
	if err != nil {
		return CPU{}, err
	}
	self, err := processCPU()
	if err != nil {
		return CPU{}, err
	}
	if ops <= 0 || stat.total <= m.stat.total {
		return CPU{}, errors.New("nothing measured")
	}
	c := CPU{Cores: stat.cores, Busy: (stat.busy - m.stat.busy) / (stat.total - m.stat.total)}
	c.PerOp = time.Duration(c.Busy * float64(stat.cores) * float64(elapsed) / float64(ops))
	c.ProcessPerOp = (self - m.self) / time.Duration(ops)
	c.SwitchesPerOp = (stat.switches - m.stat.switches) / float64(ops)
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

// PrintCPU writes what mode cost the machine's processors.
func PrintCPU(out io.Writer, mode string, c CPU) {
	fmt.Fprintf(out, "%s: the machine's %d cores were %.0f%% busy; a payment cost %.2f ms of their time, %.2f ms of it this process's (the API, the worker, the processor and the load generator), and %.0f context switches\n",
		mode, c.Cores, 100*c.Busy, float64(c.PerOp)/float64(time.Millisecond), float64(c.ProcessPerOp)/float64(time.Millisecond), c.SwitchesPerOp)
}
