// Command idemcheck checks, from the outside, that an HTTP API keeps the
// Idempotency-Key contract, and prints a table of the checks with the
// evidence of each failure; it exits 1 when one fails. "idemcheck -h" lists
// its flags; docs/IDEMCHECK.md says what each check does.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"syscall"

	"github.com/example/payments/idemcheck"
)

// main is process.Main's shape without its package, which would link the
// service's database and tracing into a tool pointed at other APIs.
func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	err := run(ctx, os.Args[1:], os.Stdout)
	stop()
	if err != nil && !errors.Is(err, flag.ErrHelp) {
		fmt.Fprintln(os.Stderr, "idemcheck:", err)
		os.Exit(1)
	}
}

// run parses the flags, runs the checks, prints the table to stdout and
// writes the JSON report if asked. Its error says how many checks failed.
func run(ctx context.Context, args []string, stdout io.Writer) error {
	opts, err := idemcheck.ParseFlags(args, stdout)
	if err != nil {
		return err
	}
	rep, err := idemcheck.Run(ctx, opts.Config)
	if rep == nil {
		return err
	}
	err = errors.Join(err, rep.WriteTable(stdout))
	if opts.JSON != "" {
		f, ferr := os.Create(opts.JSON)
		if ferr != nil {
			return errors.Join(err, ferr)
		}
		err = errors.Join(err, rep.WriteJSON(f), f.Close())
	}
	return errors.Join(err, rep.Err())
}
