package bench

import (
	"fmt"
	"io"
	"text/tabwriter"
	"time"
)

// The floors: what a run on the project's machine must reach
// (docs/BENCHMARKS.md), read off its results, so that a run says itself
// what it held.

// Floor is one floor, as a run measured it.
type Floor struct {
	// What is what is measured, and Bound what it must be.
	What, Bound string
	// Measured is the run's figure, formatted; empty when the run left the
	// mode out.
	Measured string
	Held     bool
}

// The modes the floors read, besides newKeysMode, replaysMode and
// bigTableMode. The replays run in turns with the bare one-SELECT handler.
const (
	bareSelectMode = "reference: bare HTTP handler, one SELECT"
	endToEndMode   = "payments end to end"
	endToEnd4Mode  = "payments end to end, 4 clients"
)

// Floors reads the floors off a run's results and the peak RSS of its
// process (zero: not read). A mode missing from results leaves its floor
// unmeasured and not held.
func Floors(results []Result, peakRSS int64) []Floor {
	byMode := map[string]Result{}
	var bigTable *Result
	for _, r := range results {
		byMode[r.Mode] = r
		var n int
		if _, err := fmt.Sscanf(r.Mode, bigTableMode, &n); err == nil {
			bigTable = &r
		}
	}
	ratio := func(what string, mode string, least float64) Floor {
		f := Floor{What: what, Bound: fmt.Sprintf("at least %.2f", least)}
		if r, ok := byMode[mode]; ok {
			f.Measured, f.Held = fmt.Sprintf("%.3f", r.Ratio), r.Ratio >= least
		}
		return f
	}
	floors := []Floor{
		ratio("new keys, async, worker stopped, to the insert ceiling", newKeysMode, 0.18),
		ratio("replays, to the bare one-SELECT handler", replaysMode, 0.7),
		ratio("payments end to end, to the insert ceiling", endToEndMode, 0.04),
		ratio("payments end to end behind a processor at 500 ms, to one at 0 ms", slowBehind, 0.8),
	}
	const p99Most = 25 * time.Millisecond
	e2e4 := Floor{What: "payments end to end, 4 clients, p99", Bound: "at most " + p99Most.String()}
	if r, ok := byMode[endToEnd4Mode]; ok {
		e2e4.Measured, e2e4.Held = r.P99.Round(10*time.Microsecond).String(), r.P99 <= p99Most
	}
	// Each new-key mode is a ratio to the insert ceiling it ran in turns
	// with; the big table's floor is the quotient of the two.
	big := Floor{What: "new keys with finished keys in the table, to the empty table", Bound: "within 20% (0.80 to 1.20)"}
	if newKeys, ok := byMode[newKeysMode]; ok && bigTable != nil && newKeys.Ratio > 0 {
		r := bigTable.Ratio / newKeys.Ratio
		big.Measured, big.Held = fmt.Sprintf("%.3f", r), r >= 0.8 && r <= 1.2
	}
	const rssMost = 100 << 20
	rss := Floor{What: "peak RSS of the whole bench process (the API's upper bound)", Bound: "under 100 MB"}
	if peakRSS > 0 {
		rss.Measured, rss.Held = fmt.Sprintf("%d MB", peakRSS>>20), peakRSS < rssMost
	}
	return append(floors, e2e4, big, rss)
}

// PrintFloors writes the floors, each held or missed.
func PrintFloors(out io.Writer, floors []Floor) {
	fmt.Fprintln(out, "\nthe floors (docs/BENCHMARKS.md):")
	tw := tabwriter.NewWriter(out, 0, 4, 2, ' ', 0)
	for _, f := range floors {
		verdict, measured := "missed", f.Measured
		switch {
		case measured == "":
			verdict, measured = "not measured", "-"
		case f.Held:
			verdict = "held"
		}
		fmt.Fprintf(tw, "  %s\t%s\t%s\t%s\n", f.What, f.Bound, measured, verdict)
	}
	_ = tw.Flush()
}
