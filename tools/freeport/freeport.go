// Package freeport finds loopback ports for the programs that tests and the
// chaos run start, and start again on the same port after killing them.
package freeport

import (
	"errors"
	"math/rand/v2"
	"net"
	"strconv"
	"sync"
	"syscall"
)

// The ports handed out lie below Linux's default range of ephemeral ports
// (32768 to 60999), from which the kernel picks the local port of every
// outgoing connection: a port from that range, free when a program was
// killed, may be some connection's own by the time the program is started
// again on it.
const (
	low  = 20000
	high = 32000
)

// given holds the ports this process has handed out. A port is only
// checked free, not held, until its program binds it: two calls before
// either program started (a test's processor and API, or two tests in
// parallel) could otherwise get the same port, and CI saw that happen.
var given struct {
	sync.Mutex
	ports map[int]bool
}

// Addr returns a loopback address whose port is free now, outside the
// ephemeral range, and never handed out before by this process.
func Addr() (string, error) {
	given.Lock()
	defer given.Unlock()
	if given.ports == nil {
		given.ports = make(map[int]bool)
	}
	for range 100 {
		port := low + rand.IntN(high-low)
		if given.ports[port] {
			continue
		}
		addr := net.JoinHostPort("127.0.0.1", strconv.Itoa(port))
		ln, err := net.Listen("tcp", addr)
		if err != nil {
			continue
		}
		ln.Close()
		given.ports[port] = true
		return addr, nil
	}
	return "", errors.New("no free loopback port from 20000 to 32000")
}

// Refusing returns a loopback address that refuses every connection, and a
// func that frees it. Its port is bound and never listened on: no listener
// can take it, nor the kernel as the local port of an outgoing connection,
// as either could a port whose server was closed.
func Refusing() (string, func() error, error) {
	fd, err := syscall.Socket(syscall.AF_INET, syscall.SOCK_STREAM|syscall.SOCK_CLOEXEC, 0)
	if err != nil {
		return "", nil, err
	}
	closeFD := func() error { return syscall.Close(fd) }
	if err := syscall.Bind(fd, &syscall.SockaddrInet4{Addr: [4]byte{127, 0, 0, 1}}); err != nil {
		closeFD()
		return "", nil, err
	}
	sa, err := syscall.Getsockname(fd)
	if err != nil {
		closeFD()
		return "", nil, err
	}
	return net.JoinHostPort("127.0.0.1", strconv.Itoa(sa.(*syscall.SockaddrInet4).Port)), closeFD, nil
}
