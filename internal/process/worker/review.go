package worker

import (
	"context"
	"flag"
	"fmt"
	"io"
	"strconv"
	"text/tabwriter"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/example/payments/internal/operation"
	"github.com/example/payments/internal/process"
)

// Review is the operator's view of the needs-review queue:
//
//	worker review [-all]        list the open cases (-all: resolved ones too)
//	worker review resolve ID    close a case once it has been dealt with
func Review(ctx context.Context, cfg process.Common, args []string, stdout io.Writer) error {
	fs := flag.NewFlagSet("review", flag.ContinueOnError)
	fs.SetOutput(stdout)
	all := fs.Bool("all", false, "list resolved cases too")
	if err := fs.Parse(args); err != nil {
		return err
	}
	pool, err := cfg.Connect(ctx)
	if err != nil {
		return err
	}
	defer pool.Close()

	if fs.NArg() > 0 {
		if fs.Arg(0) != "resolve" || fs.NArg() != 2 {
			return fmt.Errorf("usage: worker review [-all] | worker review resolve ID")
		}
		id, err := strconv.ParseInt(fs.Arg(1), 10, 64)
		if err != nil {
			return fmt.Errorf("case id %q is not a number", fs.Arg(1))
		}
		if err := operation.ResolveReviewCase(ctx, pool, id); err != nil {
			return err
		}
		fmt.Fprintf(stdout, "case %d resolved\n", id)
		return nil
	}

	cases, err := operation.ListReviewCases(ctx, pool, *all)
	if err != nil {
		return err
	}
	if len(cases) == 0 {
		fmt.Fprintln(stdout, "nothing needs review")
		return nil
	}
	tw := tabwriter.NewWriter(stdout, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "ID\tKIND\tREFERENCE\tCREATED\tRESOLVED\tDETAIL")
	for _, c := range cases {
		resolved := "-"
		if c.ResolvedAt != nil {
			resolved = c.ResolvedAt.UTC().Format(time.RFC3339)
		}
		fmt.Fprintf(tw, "%d\t%s\t%s\t%s\t%s\t%s\n", c.ID, c.Kind, c.Reference, c.CreatedAt.UTC().Format(time.RFC3339), resolved, c.Detail)
	}
	return tw.Flush()
}

// reviewDesc and openDesc are the metrics of the needs-review queue.
var (
	reviewDesc = prometheus.NewDesc("payments_needs_review_total",
		"Cases ever added to the needs-review queue, by kind: each distinct case once, however often it was detected.",
		[]string{"kind"}, nil)
	openDesc = prometheus.NewDesc("payments_needs_review_open",
		"Cases in the needs-review queue not resolved yet, by kind: the queue's depth.",
		[]string{"kind"}, nil)
)

// reviewCollector reads the needs-review counts from the database at each
// scrape, so that a case is counted once across restarts and replicas. Every
// kind of case in kinds is exported, at zero when it has no case, so that
// alerts see the series.
func reviewCollector(db *pgxpool.Pool, kinds []string) collector {
	return collector{descs: []*prometheus.Desc{reviewDesc, openDesc}, collect: func(ctx context.Context, ch chan<- prometheus.Metric) {
		ever, open, err := operation.CountReviewCases(ctx, db)
		if err != nil {
			ch <- prometheus.NewInvalidMetric(reviewDesc, err)
			ch <- prometheus.NewInvalidMetric(openDesc, err)
			return
		}
		for _, kind := range kinds {
			ch <- prometheus.MustNewConstMetric(reviewDesc, prometheus.CounterValue, float64(ever[kind]), kind)
			ch <- prometheus.MustNewConstMetric(openDesc, prometheus.GaugeValue, float64(open[kind]), kind)
		}
	}}
}
