//go:build !unix

package chaos

import (
	"os"
	"syscall"
)

// procAttr: no process groups here.
func procAttr() *syscall.SysProcAttr { return nil }

// signalGroup signals p alone; any signal but SIGKILL may be unsupported.
func signalGroup(p *os.Process, sig syscall.Signal) error {
	if sig == syscall.SIGKILL {
		return p.Kill()
	}
	return p.Signal(sig)
}
