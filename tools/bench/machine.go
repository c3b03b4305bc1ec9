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
}

// cpuMeter is a reading of the processors' counters at a mode's start.
type cpuMeter struct {
	at          time.Time
	busy, total float64
	cores       int
	self        time.Duration
	err         error
}

// startCPU reads the counters; stop reads them again.
func startCPU() cpuMeter {
	m := cpuMeter{at: time.Now()}
	m.busy, m.total, m.cores, m.err = machineTicks()
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
	busy, total, _, err := machineTicks()
	if err != nil {
		return CPU{}, err
	}
	self, err := processCPU()
	if err != nil {
		return CPU{}, err
	}
	if ops <= 0 || total <= m.total {
		return CPU{}, errors.New("nothing measured")
	}
	c := CPU{Cores: m.cores, Busy: (busy - m.busy) / (total - m.total)}
	c.PerOp = time.Duration(c.Busy * float64(m.cores) * float64(elapsed) / float64(ops))
	c.ProcessPerOp = (self - m.self) / time.Duration(ops)
	return c, nil
}

// machineTicks reads the time all cores spent busy and in all, in ticks,
// and how many cores there are, from /proc/stat: busy is all but idle and
// waiting for I/O.
func machineTicks() (busy, total float64, cores int, err error) {
	stat, err := os.ReadFile("/proc/stat")
	if err != nil {
		return 0, 0, 0, err
	}
	return parseStat(string(stat))
}

// parseStat reads machineTicks' figures from the text of /proc/stat.
func parseStat(stat string) (busy, total float64, cores int, err error) {
	for line := range strings.Lines(stat) {
		fields := strings.Fields(line)
		switch {
		case len(fields) > 8 && fields[0] == "cpu":
			// user nice system idle iowait irq softirq steal; guest time
			// is counted in user already.
			for i, f := range fields[1:9] {
				v, err := strconv.ParseFloat(f, 64)
				if err != nil {
					return 0, 0, 0, fmt.Errorf("/proc/stat: %w", err)
				}
				total += v
				if i != 3 && i != 4 { // idle, iowait
					busy += v
				}
			}
		case len(fields) > 0 && strings.HasPrefix(fields[0], "cpu"):
			cores++
		}
	}
	if total == 0 || cores == 0 {
		return 0, 0, 0, errors.New("/proc/stat: no cpu line")
	}
	return busy, total, cores, nil
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
	fmt.Fprintf(out, "%s: the machine's %d cores were %.0f%% busy; a payment cost %.2f ms of their time, %.2f ms of it this process's (the API, the worker, the processor and the load generator)\n",
		mode, c.Cores, 100*c.Busy, float64(c.PerOp)/float64(time.Millisecond), float64(c.ProcessPerOp)/float64(time.Millisecond))
}
