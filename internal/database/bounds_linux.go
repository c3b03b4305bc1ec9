package database

import (
	"strings"
	"syscall"
)

// tcpUserTimeout is TCP_USER_TIMEOUT, which package syscall does not name.
const tcpUserTimeout = 0x12

// setUserTimeout sets TCP_USER_TIMEOUT to UserTimeout on a TCP socket
// before it connects: the kernel drops the connection once data it sent,
// keepalive probes included, has gone unacknowledged that long. A Unix
// socket is left alone.
func setUserTimeout(network, _ string, c syscall.RawConn) error {
	if !strings.HasPrefix(network, "tcp") {
		return nil
	}
	var err error
	if cerr := c.Control(func(fd uintptr) {
		err = syscall.SetsockoptInt(int(fd), syscall.IPPROTO_TCP, tcpUserTimeout, int(UserTimeout.Milliseconds()))
	}); cerr != nil {
		return cerr
	}
	return err
}
