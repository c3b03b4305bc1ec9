package bench

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"runtime/pprof"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"
	"unicode"
)

// How a mode is measured: from many clients at once for a while, alone
// or in turns with its reference, with a CPU profile when asked.

// startProfile starts a CPU profile of the mode name in dir, when dir is
// set, and returns what stops it. A mode measured in turns has a file a
// turn (turn 1 on, name.1.pprof and so on; go tool pprof merges them).
func startProfile(dir, name string, turn int) (func(), error) {
	if dir == "" {
		return func() {}, nil
	}
	slug := strings.Map(func(r rune) rune {
		if unicode.IsLetter(r) || unicode.IsDigit(r) {
			return r
		}
		return '-'
	}, name)
	// The directory is made if missing: a run that measured for minutes
	// must not fail at its first profile.
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, err
	}
	if turn > 0 {
		slug += "." + strconv.Itoa(turn)
	}
	f, err := os.Create(filepath.Join(dir, slug+".pprof"))
	if err != nil {
		return nil, err
	}
	if err := pprof.StartCPUProfile(f); err != nil {
		f.Close()
		return nil, err
	}
	return func() { pprof.StopCPUProfile(); f.Close() }, nil
}

// peakRSS reads the process's peak resident set size (VmHWM) from Linux's
// /proc, in bytes.
func peakRSS() (int64, error) {
	status, err := os.ReadFile("/proc/self/status")
	if err != nil {
		return 0, err
	}
	for line := range strings.Lines(string(status)) {
		if rest, ok := strings.CutPrefix(line, "VmHWM:"); ok {
			kb, err := strconv.ParseInt(strings.TrimSuffix(strings.TrimSpace(rest), " kB"), 10, 64)
			return kb << 10, err
		}
	}
	return 0, errors.New("no VmHWM in /proc/self/status")
}

// measure runs op from clients goroutines for d and reports the rate and
// the latency percentiles, with a progress line every two seconds.
func measure(ctx context.Context, name string, clients int, d time.Duration, out io.Writer, op func() error) (Result, error) {
	var s sample
	err := s.run(ctx, clients, d, op, func(done int64, elapsed time.Duration) {
		fmt.Fprintf(out, "bench %-45s %5.1fs  %8.0f/s\n", name, elapsed.Seconds(), float64(done)/elapsed.Seconds())
	})
	return s.result(name, clients), err
}

// turns is how many slices a mode measured against a reference takes, and
// as many the reference (alternate).
const turns = 5

// reference is what a mode is measured against in turns with it: a ceiling
// or a bare handler, run as the mode runs.
type reference struct {
	mode string
	op   func() error
}

// alternate measures op and ref's op in turns, from clients goroutines,
// each for d in all, in slices of d/turns: the reference first in odd turns
// and second in even ones, so that a machine that slows down or speeds up
// while they run weighs on both alike, as it does not when a ceiling
// measured minutes earlier is the divisor. slice(i) is called around each of
// op's slices (its profile). The mode's result is a ratio to the
// reference's, which is returned too.
func alternate(ctx context.Context, name string, clients int, d time.Duration, out io.Writer, ref reference, op func() error,
	slice func(i int) (func(), error)) (Result, Result, error) {
	var mine, theirs sample
	part := d / turns
	for i := range turns {
		runs := []func() error{
			func() error { return theirs.run(ctx, clients, part, ref.op, nil) },
			func() error {
				stop, err := slice(i)
				if err != nil {
					return err
				}
				defer stop()
				return mine.run(ctx, clients, part, op, nil)
			},
		}
		if i%2 == 1 {
			slices.Reverse(runs)
		}
		for _, run := range runs {
			if err := run(); err != nil {
				return Result{}, Result{}, err
			}
		}
		fmt.Fprintf(out, "bench %-45s %d/%d  %8.0f/s, its reference %8.0f/s\n", name, i+1, turns, mine.rate(), theirs.rate())
	}
	r, against := mine.result(name, clients), theirs.result(ref.mode+", in turns", clients)
	r.Ceiling, r.Ratio = against.Mode, r.PerSecond/against.PerSecond
	return r, against, nil
}

// sample is what one or more runs of an operation measured.
type sample struct {
	latencies []time.Duration
	elapsed   time.Duration
	err       error
}

// run runs op from clients goroutines for d, adding what it measures to s,
// and calls tick, when set, every two seconds with how many ops are done.
// It returns the first error an op returned before d ended.
func (s *sample) run(ctx context.Context, clients int, d time.Duration, op func() error, tick func(done int64, elapsed time.Duration)) error {
	ctx, cancel := context.WithTimeout(ctx, d)
	defer cancel()
	var (
		mu   sync.Mutex
		done atomic.Int64
		wg   sync.WaitGroup
	)
	start := time.Now()
	for range clients {
		wg.Go(func() {
			var mine []time.Duration
			for ctx.Err() == nil {
				t := time.Now()
				if err := op(); err != nil {
					if ctx.Err() == nil {
						mu.Lock()
						s.err = cmp(s.err, err)
						mu.Unlock()
					}
					continue
				}
				mine = append(mine, time.Since(t))
				done.Add(1)
			}
			mu.Lock()
			s.latencies = append(s.latencies, mine...)
			mu.Unlock()
		})
	}
	if tick != nil {
		t := time.NewTicker(2 * time.Second)
		for loop := true; loop; {
			select {
			case <-ctx.Done():
				loop = false
			case <-t.C:
				tick(done.Load(), time.Since(start))
			}
		}
		t.Stop()
	}
	wg.Wait()
	s.elapsed += time.Since(start)
	return s.err
}

// rate is ops a second so far.
func (s *sample) rate() float64 {
	if s.elapsed <= 0 {
		return 0
	}
	return float64(len(s.latencies)) / s.elapsed.Seconds()
}

// result is the rate and the latency percentiles of all s measured.
func (s *sample) result(name string, clients int) Result {
	r := Result{Mode: name, Clients: clients, Ops: len(s.latencies), PerSecond: s.rate()}
	r.P50, r.P90, r.P99 = percentiles(s.latencies)
	return r
}

func cmp(a, b error) error {
	if a != nil {
		return a
	}
	return b
}
