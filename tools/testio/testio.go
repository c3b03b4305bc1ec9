// Package testio holds what tests write program output to.
package testio

import (
	"bytes"
	"sync"
)

// Buffer collects what a program or a logger writes, safely for the
// concurrent writes of handlers and goroutines and the reads of a test.
type Buffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

// Write implements io.Writer.
func (b *Buffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

// String is everything written so far.
func (b *Buffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}
