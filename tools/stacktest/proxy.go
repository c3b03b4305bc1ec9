package stacktest

import (
	"bytes"
	"net"
	"sync"
	"testing"
)

// Proxy is a TCP proxy that a test can cut, to take a database away from the
// process that talks through it without touching anything else.
type Proxy struct {
	ln     net.Listener
	target string

	mu    sync.Mutex
	cut   bool
	conns map[net.Conn]struct{}
	// loseCommit: the next answer from the server that reports a COMMIT
	// done is dropped and its connection closed (LoseCommitAnswer).
	loseCommit bool
	wg         sync.WaitGroup
}

// NewProxy listens on a free loopback port and forwards to target until t ends.
func NewProxy(t testing.TB, target string) *Proxy {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	p := &Proxy{ln: ln, target: target, conns: make(map[net.Conn]struct{})}
	p.wg.Go(p.accept)
	t.Cleanup(func() {
		ln.Close()
		p.Cut()
		p.wg.Wait()
	})
	return p
}

// Addr is where to connect instead of the target.
func (p *Proxy) Addr() string { return p.ln.Addr().String() }

// Cut closes every open connection and refuses new ones until Restore.
func (p *Proxy) Cut() {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.cut = true
	for c := range p.conns {
		c.Close()
	}
}

// Restore lets connections through again.
func (p *Proxy) Restore() {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.cut = false
}

func (p *Proxy) accept() {
	for {
		client, err := p.ln.Accept()
		if err != nil {
			return
		}
		p.mu.Lock()
		if p.cut {
			p.mu.Unlock()
			client.Close()
			continue
		}
		server, err := net.Dial("tcp", p.target)
		if err != nil {
			p.mu.Unlock()
			client.Close()
			continue
		}
		p.conns[client], p.conns[server] = struct{}{}, struct{}{}
		p.mu.Unlock()
		p.wg.Go(func() { p.pipe(client, server, true) })
		p.wg.Go(func() { p.pipe(server, client, false) })
	}
}

// LoseCommitAnswer makes the next answer of the server that reports a
// COMMIT done (its CommandComplete) vanish, the connection closed on both
// sides instead: the transaction committed, and its client is left to
// guess, as when a network fails just after a commit.
func (p *Proxy) LoseCommitAnswer() {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.loseCommit = true
}

// commitDone is the body of the CommandComplete message for a COMMIT.
var commitDone = []byte("COMMIT\x00")

// pipe copies one direction, the server's answers to the client when
// fromServer, and closes both ends when it ends.
func (p *Proxy) pipe(dst, src net.Conn, fromServer bool) {
	buf := make([]byte, 32<<10)
	for {
		n, err := src.Read(buf)
		if n > 0 && fromServer && p.losesAnswer(buf[:n]) {
			break
		}
		if n > 0 {
			if _, werr := dst.Write(buf[:n]); werr != nil {
				break
			}
		}
		if err != nil {
			break
		}
	}
	p.mu.Lock()
	delete(p.conns, dst)
	delete(p.conns, src)
	p.mu.Unlock()
	dst.Close()
	src.Close()
}

// losesAnswer reports whether answer is the one LoseCommitAnswer asked to
// lose, disarming it.
func (p *Proxy) losesAnswer(answer []byte) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	if !p.loseCommit || !bytes.Contains(answer, commitDone) {
		return false
	}
	p.loseCommit = false
	return true
}
