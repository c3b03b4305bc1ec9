//go:build !linux

package database

import "syscall"

// setUserTimeout does nothing where TCP_USER_TIMEOUT is not Linux's: the
// keepalives alone bound an idle connection there.
func setUserTimeout(string, string, syscall.RawConn) error { return nil }
