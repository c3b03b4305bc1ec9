package signing

import (
	"crypto/aes"
	"crypto/cipher"
	"crypto/rand"
	"encoding/base64"
	"errors"
	"fmt"
)

// Box encrypts signing secrets at rest with AES-256-GCM, keyed by
// WEBHOOK_SECRETS_KEY: the database alone never reveals a secret. The zero
// value has no key and refuses to work. Printed, it shows nothing of the
// key.
type Box struct {
	aead cipher.AEAD
}

// Decode lets envconfig read the key: 32 bytes in standard base64.
func (c *Box) Decode(value string) error {
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
func (c Box) String() string {
	if c.aead == nil {
		return "(unset)"
	}
	return "(set)"
}

// Set reports whether the cipher has a key.
func (c Box) Set() bool { return c.aead != nil }

// errNoKey reports a cipher without a key.
var errNoKey = errors.New("WEBHOOK_SECRETS_KEY is not set")

// Seal encrypts plaintext, bound to owner (so that a ciphertext moved to
// another owner does not decrypt): a random nonce, then the sealed bytes.
func (c Box) Seal(owner string, plaintext []byte) ([]byte, error) {
	if c.aead == nil {
		return nil, errNoKey
	}
	nonce := make([]byte, c.aead.NonceSize())
	_, _ = rand.Read(nonce) // never fails, per crypto/rand
	return c.aead.Seal(nonce, nonce, plaintext, []byte(owner)), nil
}

// Open decrypts what Seal made for owner.
func (c Box) Open(owner string, sealed []byte) ([]byte, error) {
	if c.aead == nil {
		return nil, errNoKey
	}
	n := c.aead.NonceSize()
	if len(sealed) < n {
		return nil, errors.New("decrypt secret: too short")
	}
	plain, err := c.aead.Open(nil, sealed[:n], sealed[n:], []byte(owner))
	if err != nil {
		return nil, fmt.Errorf("decrypt secret of %s: %w", owner, err)
	}
	return plain, nil
}
