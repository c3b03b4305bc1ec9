// Package linkfault puts an in-process Toxiproxy on the link between a
// process and Postgres, to do to that link what a network does: cut it
// silently (a partition: no data, no reset), slow it, narrow it. A test
// or the chaos run gives each process a link of its own, so that one can
// be cut alone.
package linkfault

import (
	"context"
	"fmt"
	"net/url"
	"strings"
	"time"

	toxiproxy "github.com/Shopify/toxiproxy/v2"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/rs/zerolog"
)

// Link is a proxy on loopback in front of a server: what connects to Addr
// reaches the server through it.
type Link struct {
	// Addr is where the link listens.
	Addr  string
	proxy *toxiproxy.Proxy
}

// New starts a link on a free loopback port in front of upstream (a
// host:port).
func New(name, upstream string) (*Link, error) {
	// Toxiproxy's toxics log through zerolog's global logger, at every
	// chunk they pass on: nothing of it is wanted here.
	zerolog.SetGlobalLevel(zerolog.Disabled)
	server := toxiproxy.NewServer(toxiproxy.NewMetricsContainer(prometheus.NewRegistry()), zerolog.Nop())
	proxy := toxiproxy.NewProxy(server, name, "127.0.0.1:0", upstream)
	if err := proxy.Start(); err != nil {
		return nil, fmt.Errorf("start link %s: %w", name, err)
	}
	return &Link{Addr: proxy.Listen, proxy: proxy}, nil
}

// Before starts a link, as New does, in front of the server dbURL names,
// and returns it and dbURL through it.
func Before(name, dbURL string) (*Link, string, error) {
	u, err := url.Parse(dbURL)
	if err != nil {
		return nil, "", fmt.Errorf("parse database url: %w", err)
	}
	l, err := New(name, u.Host)
	if err != nil {
		return nil, "", err
	}
	u.Host = l.Addr
	return l, u.String(), nil
}

// Close stops the link and drops every connection through it.
func (l *Link) Close() { l.proxy.Stop() }

// partition is the timeout toxic with no timeout: it holds each
// connection open and passes nothing either way, and a side that closes
// its end closes the other's, as a peer's kernel would once it gave up.
var partition = []string{
	`{"name": "partition_up", "type": "timeout", "stream": "upstream", "attributes": {"timeout": 0}}`,
	`{"name": "partition_down", "type": "timeout", "stream": "downstream", "attributes": {"timeout": 0}}`,
}

// Partition cuts the link silently, until Heal: the connections through it
// stay open, new ones are accepted, and nothing passes.
func (l *Link) Partition() error { return l.add(partition...) }

// Heal ends a Partition.
func (l *Link) Heal() error { return l.remove("partition_up", "partition_down") }

// Slow adds latency (give or take jitter) to what the server sends, and
// limits it to kbps kilobytes a second, until Unslow.
func (l *Link) Slow(latency, jitter time.Duration, kbps int64) error {
	return l.add(
		fmt.Sprintf(`{"name": "latency", "type": "latency", "stream": "downstream", "attributes": {"latency": %d, "jitter": %d}}`,
			latency.Milliseconds(), jitter.Milliseconds()),
		fmt.Sprintf(`{"name": "bandwidth", "type": "bandwidth", "stream": "downstream", "attributes": {"rate": %d}}`, kbps))
}

// Unslow ends a Slow.
func (l *Link) Unslow() error { return l.remove("latency", "bandwidth") }

func (l *Link) add(toxics ...string) error {
	for _, t := range toxics {
		if _, err := l.proxy.Toxics.AddToxicJson(strings.NewReader(t)); err != nil {
			return fmt.Errorf("add toxic to %s: %w", l.proxy.Name, err)
		}
	}
	return nil
}

func (l *Link) remove(names ...string) error {
	for _, n := range names {
		if err := l.proxy.Toxics.RemoveToxic(context.Background(), n); err != nil {
			return fmt.Errorf("remove toxic %s from %s: %w", n, l.proxy.Name, err)
		}
	}
	return nil
}
