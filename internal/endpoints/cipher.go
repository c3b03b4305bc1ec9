package endpoints

import (
	"crypto/aes"
	"crypto/cipher"
	"crypto/rand"
	"encoding/base64"
	"errors"
	"fmt"
)

// Cipher encrypts the endpoints' signing secrets at rest with AES-256-GCM,
// keyed by WEBHOOK_SECRETS_KEY: the database alone never reveals a secret.
// The zero value has no key and refuses to work. Printed, it shows nothing
// of the key.
type Cipher struct {
	aead cipher.AEAD
}

// Decode lets envconfig read the key: 32 bytes in standard base64.
func (c *Cipher) Decode(value string) error {
	if value == "" {
		return nil
	}
	key, err := base64.StdEncoding.DecodeString(value)
	if err != nil || len(key) != 32 {
		return errors.New("not 32 bytes in standard base64 (make one with: openssl rand -base64 32)")
	}
	block, err := aes.NewCipher(key)
	if err != nil {
		return err
	}
	aead, err := cipher.NewGCM(block)
	if err != nil {
		return err
	}
	c.aead = aead
	return nil
}

// String masks the key.
func (c Cipher) String() string {
	if c.aead == nil {
		return "(unset)"
	}
	return "(set)"
}

// Set reports whether the cipher has a key.
func (c Cipher) Set() bool { return c.aead != nil }

// errNoKey reports a cipher without a key.
var errNoKey = errors.New("WEBHOOK_SECRETS_KEY is not set")

// seal encrypts plaintext, bound to endpointID (so that a ciphertext moved
// to another endpoint does not decrypt): a random nonce, then the sealed
// bytes.
func (c Cipher) seal(endpointID string, plaintext []byte) ([]byte, error) {
	if c.aead == nil {
		return nil, errNoKey
	}
	nonce := make([]byte, c.aead.NonceSize())
	_, _ = rand.Read(nonce) // never fails, per crypto/rand
	return c.aead.Seal(nonce, nonce, plaintext, []byte(endpointID)), nil
}

// open decrypts what seal made for endpointID.
func (c Cipher) open(endpointID string, sealed []byte) ([]byte, error) {
	if c.aead == nil {
		return nil, errNoKey
	}
	n := c.aead.NonceSize()
	if len(sealed) < n {
		return nil, errors.New("decrypt secret: too short")
	}
	plain, err := c.aead.Open(nil, sealed[:n], sealed[n:], []byte(endpointID))
	if err != nil {
		return nil, fmt.Errorf("decrypt secret of %s: %w", endpointID, err)
	}
	return plain, nil
}
