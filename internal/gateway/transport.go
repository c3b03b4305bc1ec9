package gateway

import (
	"net/http"
	"time"
)

// maxIdleConns bounds the connections to the processor kept open between
// calls: more than the calls a worker has in flight at once (its jobs, the
// reconciler's and the ledger's), so that each call finds one open.
const maxIdleConns = 256

// Transport is the connections to the processor, one host, for every
// adapter's client. Go's default transport keeps two idle connections a
// host: past two calls at once, a call dialed anew and closed its
// connection after the answer, and the worker paid a TCP handshake (and
// left a socket in TIME_WAIT) on most calls. An idle connection closes
// after IdleConnTimeout, as by default.
func Transport() *http.Transport {
	t := http.DefaultTransport.(*http.Transport).Clone()
	t.MaxIdleConns, t.MaxIdleConnsPerHost = maxIdleConns, maxIdleConns
	return t
}

// Client is an adapter's HTTP client of the processor: each request bounded
// by timeout as a whole, over Transport, paced by pace (Paced; nil: none).
func Client(timeout time.Duration, pace *Pace) *http.Client {
	return &http.Client{Timeout: timeout, Transport: Paced(Transport(), pace)}
}
