package database

import (
	"context"
	"net"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"
)

// TestBoundsOnSocket: a connection dialled with the bounds has, on its
// socket, the keepalives and TCP_USER_TIMEOUT bound states, and the
// config a connect timeout and a pool a ping timeout, unless the URL set
// them.
func TestBoundsOnSocket(t *testing.T) {
	t.Parallel()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	cfg, err := pgxpool.ParseConfig("postgres://u@" + ln.Addr().String() + "/d")
	if err != nil {
		t.Fatal(err)
	}
	boundPool(cfg, false)
	if cfg.ConnConfig.AfterConnect == nil {
		t.Error("a pool past any pooler leaves its sessions' server side unbounded")
	}
	if cfg.ConnConfig.ConnectTimeout != ConnectTimeout || cfg.PingTimeout != PingTimeout {
		t.Errorf("connect timeout %s, ping timeout %s; want %s, %s", cfg.ConnConfig.ConnectTimeout, cfg.PingTimeout, ConnectTimeout, PingTimeout)
	}
	conn, err := cfg.ConnConfig.DialFunc(context.Background(), "tcp", ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	raw, err := conn.(*net.TCPConn).SyscallConn()
	if err != nil {
		t.Fatal(err)
	}
	want := map[string][2]int{
		"SO_KEEPALIVE":     {syscall.SOL_SOCKET, syscall.SO_KEEPALIVE},
		"TCP_KEEPIDLE":     {syscall.IPPROTO_TCP, syscall.TCP_KEEPIDLE},
		"TCP_KEEPINTVL":    {syscall.IPPROTO_TCP, syscall.TCP_KEEPINTVL},
		"TCP_KEEPCNT":      {syscall.IPPROTO_TCP, syscall.TCP_KEEPCNT},
		"TCP_USER_TIMEOUT": {syscall.IPPROTO_TCP, tcpUserTimeout},
	}
	values := map[string]int{"SO_KEEPALIVE": 1, "TCP_KEEPIDLE": int(KeepaliveIdle / time.Second),
		"TCP_KEEPINTVL": int(KeepaliveInterval / time.Second), "TCP_KEEPCNT": KeepaliveCount,
		"TCP_USER_TIMEOUT": int(UserTimeout.Milliseconds())}
	for name, opt := range want {
		var got int
		var gerr error
		if err := raw.Control(func(fd uintptr) { got, gerr = syscall.GetsockoptInt(int(fd), opt[0], opt[1]) }); err != nil || gerr != nil {
			t.Fatalf("read %s: %v %v", name, err, gerr)
		}
		if got != values[name] {
			t.Errorf("%s = %d, want %d", name, got, values[name])
		}
	}

	// The URL's own connect timeout stands.
	own, err := pgconn.ParseConfig("postgres://u@" + ln.Addr().String() + "/d?connect_timeout=3")
	if err != nil {
		t.Fatal(err)
	}
	bound(own)
	if own.ConnectTimeout != 3*time.Second {
		t.Errorf("the URL's connect_timeout=3 became %s", own.ConnectTimeout)
	}
}
