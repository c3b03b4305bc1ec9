// Command benchcount counts the instructions of Go a request costs the
// services' process, by mode, under valgrind's callgrind: a replay, a new
// key and the bare one-SELECT handler that make bench divides replays by.
// A count is the same on a busy machine as on an idle one, where a rate
// moves by a tenth between runs of the same code: it tells whether a change
// made the process's work smaller. It leaves out what a rate includes: the
// kernel's time (system calls), Postgres's, and the garbage collector's
// (GOGC=off; its cost follows the allocations, counted beside, outside
// valgrind). "make bench-count" runs it;
// "benchcount -h" lists its settings.
package main

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"text/tabwriter"
	"time"

	"github.com/example/payments/internal/database"
	"github.com/example/payments/internal/process"
	"github.com/example/payments/internal/process/api"
	"github.com/example/payments/tools/bench"
)

type config struct {
	DatabaseURL string `envconfig:"DATABASE_URL" default:"postgres://postgres@127.0.0.1:5432/payments?sslmode=disable" desc:"the server; the run creates a database of its own there"`
	Requests    int    `envconfig:"BENCH_COUNT_REQUESTS" default:"1000" desc:"requests a mode is counted over: each mode runs twice, with warmup requests and with this many more, and the difference is divided by it"`
	Warmup      int    `envconfig:"BENCH_COUNT_WARMUP" default:"200" desc:"requests of the shorter run, whose count (the process starting, its first requests) the longer run's loses"`
	// Set by the command for the runs it starts under valgrind.
	Mode string `envconfig:"BENCH_COUNT_MODE" desc:"(set by the command itself) run this many requests of this mode and exit"`
	N    int    `envconfig:"BENCH_COUNT_N" desc:"(set by the command itself)"`
}

func main() { process.Main("benchcount", run) }

func run(ctx context.Context, args []string, stdout io.Writer) error {
	var cfg config
	if err := process.Configure(args, stdout, "benchcount", "Instructions of Go a request, by mode, under callgrind.", &cfg); err != nil {
		return err
	}
	if cfg.Mode != "" {
		_, err := bench.Count(ctx, cfg.DatabaseURL, cfg.Mode, cfg.N)
		return err
	}
	if _, err := exec.LookPath("valgrind"); err != nil {
		return fmt.Errorf("valgrind is needed (Debian: apt-get install valgrind): %w", err)
	}
	url, drop, err := database.CreateFresh(ctx, cfg.DatabaseURL, fmt.Sprintf("benchcount_%d", time.Now().Unix()))
	if err != nil {
		return err
	}
	defer drop()
	if err := api.Migrate(ctx, url, slog.New(slog.DiscardHandler)); err != nil {
		return err
	}
	if err := bench.PrepareCount(ctx, url); err != nil {
		return err
	}
	return countModes(ctx, cfg, url, stdout)
}

// countModes counts each mode on the database at url and prints the table:
// a mode runs twice under callgrind, with cfg.Warmup requests and with
// cfg.Requests more, and the difference is divided by cfg.Requests.
func countModes(ctx context.Context, cfg config, url string, stdout io.Writer) error {
	self, err := os.Executable()
	if err != nil {
		return err
	}
	dir, err := os.MkdirTemp("", "benchcount")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)
	fmt.Fprintf(stdout, "benchcount: %d requests a mode, one at a time, after %d; GOMAXPROCS=1 GOGC=off\n", cfg.Requests, cfg.Warmup)
	perRequest, allocs := map[string]float64{}, map[string]float64{}
	for _, mode := range bench.CountModes {
		var counts [2]int64
		var made [2]uint64
		for i, n := range []int{cfg.Warmup, cfg.Warmup + cfg.Requests} {
			if counts[i], err = callgrind(ctx, self, dir, url, mode, n); err != nil {
				return fmt.Errorf("%s, %d requests: %w", mode, n, err)
			}
			// The allocations are counted here, not under valgrind, whose
			// slowness would add those of the process's own timers.
			if made[i], err = bench.Count(ctx, url, mode, n); err != nil {
				return err
			}
		}
		perRequest[mode] = float64(counts[1]-counts[0]) / float64(cfg.Requests)
		allocs[mode] = float64(made[1]-made[0]) / float64(cfg.Requests)
		fmt.Fprintf(stdout, "benchcount: %s counted\n", mode)
	}
	tw := tabwriter.NewWriter(stdout, 0, 4, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "mode\tinstructions a request\tthe bare handler's, to it\tallocations a request\t")
	for _, mode := range bench.CountModes {
		fmt.Fprintf(tw, "%s\t%.0f\t%.3f\t%.0f\t\n", mode, perRequest[mode], perRequest[bench.CountBare]/perRequest[mode], allocs[mode])
	}
	return tw.Flush()
}

// collected is callgrind's total, on its last line.
var collected = regexp.MustCompile(`Collected : (\d+)`)

// callgrind runs n requests of mode in this command, under callgrind, and
// returns the instructions the whole process ran. Go's preemption by signal
// is off: callgrind cannot follow it.
func callgrind(ctx context.Context, self, dir, url, mode string, n int) (int64, error) {
	cmd := exec.CommandContext(ctx, "valgrind", "--tool=callgrind",
		"--callgrind-out-file="+filepath.Join(dir, "callgrind.out"), self)
	cmd.Env = append(os.Environ(), "GOMAXPROCS=1", "GOGC=off", "GODEBUG=asyncpreemptoff=1",
		"DATABASE_URL="+url, "BENCH_COUNT_MODE="+mode, "BENCH_COUNT_N="+strconv.Itoa(n))
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	if err := cmd.Run(); err != nil {
		return 0, fmt.Errorf("%w: %s", err, stderr.String())
	}
	m := collected.FindSubmatch(stderr.Bytes())
	if m == nil {
		return 0, fmt.Errorf("no count in callgrind's output: %s", stderr.String())
	}
	return strconv.ParseInt(string(m[1]), 10, 64)
}
