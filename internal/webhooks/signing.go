package webhooks

import (
	"bytes"
	"context"
	"fmt"
	"net/http"
	"time"

	"github.com/example/payments/internal/signing"
)

// secrets decrypts the secrets that sign a's delivery.
func (d *Deliverer) secrets(a attempt) (signing.Secrets, error) {
	var list []byte
	for i, sealed := range a.sealed {
		plain, err := d.Cipher.Open(a.endpoint, sealed)
		if err != nil {
			return signing.Secrets{}, err
		}
		if i > 0 {
			list = append(list, ',')
		}
		list = append(list, plain...)
	}
	return signing.ParseSecrets(string(list))
}

// signedRequest is the POST of body to a's URL, signed with secrets as
// Standard Webhooks specifies, with the event's id as the message's id and
// now as its timestamp.
func signedRequest(ctx context.Context, a attempt, body []byte, secrets signing.Secrets) (*http.Request, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, a.url, bytes.NewReader(body))
	if err != nil {
		return nil, fmt.Errorf("request: %w", err)
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("User-Agent", "payments-webhooks/1")
	if err := secrets.Sign(req.Header, a.eventID, time.Now(), body); err != nil {
		return nil, err
	}
	return req, nil
}
