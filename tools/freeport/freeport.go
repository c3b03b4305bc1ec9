// Package freeport finds loopback ports for the programs that tests and the
// chaos run start, and start again on the same port after killing them.
package freeport

import (
	"errors"
	"math/rand/v2"
	"net"
	"strconv"
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

// Addr returns a loopback address whose port is free now, outside the
// ephemeral range.
func Addr() (string, error) {
	for range 100 {
		addr := net.JoinHostPort("127.0.0.1", strconv.Itoa(low+rand.IntN(high-low)))
		ln, err := net.Listen("tcp", addr)
		if err != nil {
			continue
		}
		ln.Close()
		return addr, nil
	}
	return "", errors.New("no free loopback port from 20000 to 32000")
}
