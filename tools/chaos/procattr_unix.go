//go:build unix && !linux

package chaos

import (
	"os"
	"syscall"
)

// procAttr starts a process of the stack as the leader of a process group
// of its own, so that a signal reaches whatever it starts too. Only Linux
// can also have the kernel kill it when the chaos process dies.
func procAttr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Setpgid: true}
}

// signalGroup sends sig to p's process group.
func signalGroup(p *os.Process, sig syscall.Signal) error {
	return syscall.Kill(-p.Pid, sig)
}
