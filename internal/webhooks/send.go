package webhooks

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"strconv"
	"syscall"
	"time"

	"github.com/example/payments/internal/safehttp"
	"github.com/example/payments/internal/signing"
)

// attempt makes a's attempt: the event read, signed and POSTed. An event
// that cannot be read is the service's own error (its database), returned:
// nothing left for the endpoint, so no attempt is spent and the job is
// retried. Secrets that do not decrypt are the endpoint's, and an attempt
// that failed.
func (d *Deliverer) attempt(ctx context.Context, a attempt) (outcome, error) {
	ev, err := d.Events.GetEvent(ctx, a.tenantID, a.eventID)
	if err != nil {
		return outcome{}, fmt.Errorf("read event %s: %w", a.eventID, err)
	}
	secrets, err := d.secrets(a)
	if err != nil {
		return d.retry(a, outcome{err: "the endpoint's signing secrets could not be read"}, 0), nil
	}
	return d.post(ctx, a, d.Encode(ev), secrets), nil
}

// post makes the attempt: body signed with secrets, POSTed to the
// endpoint's URL, and classifies the answer.
func (d *Deliverer) post(ctx context.Context, a attempt, body []byte, secrets signing.Secrets) outcome {
	start := time.Now()
	out := outcome{}
	status, retryAfter, err := d.send(ctx, a, body, secrets)
	out.duration = time.Since(start)
	if status > 0 {
		out.statusCode = &status
	}
	switch {
	case err == nil && status >= 200 && status <= 299:
		out.result = ResultDelivered
		return out
	case status == http.StatusGone:
		out.result, out.err = ResultGone, "the receiver answered 410 Gone: the endpoint is disabled"
		return out
	case errors.Is(err, safehttp.ErrForbiddenURL):
		// The text would show the address it resolved to.
		out.err = "refused: the URL resolves to an address that is not public"
	case err != nil:
		out.err = sendError(err)
	default:
		out.err = "the receiver answered " + strconv.Itoa(status)
	}
	if status == http.StatusTooManyRequests || status == http.StatusServiceUnavailable {
		return d.retry(a, out, retryAfter)
	}
	return d.retry(a, out, 0)
}

// sendError says why a POST got no answer, in words of the service's own:
// the log never shows an error's text, which can name the resolver, the
// addresses a host resolved to or the network inside.
func sendError(err error) string {
	var (
		dns     *net.DNSError
		netErr  net.Error
		certErr *tls.CertificateVerificationError
		recErr  tls.RecordHeaderError
	)
	switch {
	case errors.As(err, &dns):
		return "the URL's host did not resolve"
	case errors.Is(err, context.DeadlineExceeded), errors.As(err, &netErr) && netErr.Timeout():
		return "the receiver did not answer in time"
	case errors.Is(err, syscall.ECONNREFUSED):
		return "the receiver refused the connection"
	case errors.As(err, &certErr), errors.As(err, &recErr):
		return "the TLS handshake failed"
	case errors.Is(err, syscall.ECONNRESET), errors.Is(err, io.EOF), errors.Is(err, io.ErrUnexpectedEOF):
		return "the receiver closed the connection without an answer"
	}
	return "the request could not be sent"
}

// send POSTs body to a's URL, signed (signedRequest), and returns the
// answer's status (0 when there was none) and its Retry-After.
func (d *Deliverer) send(ctx context.Context, a attempt, body []byte, secrets signing.Secrets) (int, time.Duration, error) {
	req, err := signedRequest(ctx, a, body, secrets)
	if err != nil {
		return 0, 0, err
	}
	resp, err := d.Client.Do(req)
	if err != nil {
		return 0, 0, err
	}
	defer resp.Body.Close()
	_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, 64<<10))
	return resp.StatusCode, retryAfter(resp.Header.Get("Retry-After")), nil
}

// retryAfter reads a Retry-After header: seconds, or an HTTP date; zero when
// absent or unreadable.
func retryAfter(v string) time.Duration {
	if v == "" {
		return 0
	}
	if s, err := strconv.Atoi(v); err == nil && s > 0 {
		return time.Duration(s) * time.Second
	}
	if t, err := http.ParseTime(v); err == nil {
		return max(time.Until(t), 0)
	}
	return 0
}
