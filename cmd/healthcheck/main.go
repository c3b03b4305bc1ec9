// Command healthcheck asks one of the programs whether it is healthy, for a
// container's health check: the images have no shell and no curl.
// "healthcheck URL" exits 0 when URL answers 2xx within two seconds, and 1,
// saying why, otherwise.
package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"time"
)

func main() {
	if err := run(context.Background(), os.Args[1:]); err != nil {
		fmt.Fprintln(os.Stderr, "healthcheck:", err)
		os.Exit(1)
	}
}

// timeout bounds the whole check; the container runtime has its own.
const timeout = 2 * time.Second

// run GETs the one URL in args and fails unless it answers 2xx.
func run(ctx context.Context, args []string) error {
	if len(args) != 1 {
		return errors.New("usage: healthcheck URL (e.g. http://127.0.0.1:9091/healthz)")
	}
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, args[0], nil)
	if err != nil {
		return err
	}
	client := &http.Client{}
	defer client.CloseIdleConnections()
	res, err := client.Do(req)
	if err != nil {
		return err
	}
	defer res.Body.Close()
	_, _ = io.Copy(io.Discard, io.LimitReader(res.Body, 64<<10))
	if res.StatusCode < 200 || res.StatusCode > 299 {
		return fmt.Errorf("%s answered %s", args[0], res.Status)
	}
	return nil
}
