package chaos

import (
	"os"
	"syscall"
)

// procAttr starts a process of the stack as the leader of a process group
// of its own, so that a signal reaches whatever it starts too, and has the
// kernel SIGKILL it when the chaos process dies, even by SIGKILL or a panic,
// which run no deferred stop. (The signal follows the death of the thread
// that started the process; Go ends no thread of its own while the process
// lives, unless a goroutine that locked its thread exits, which none here
// does.)
func procAttr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
}

// signalGroup sends sig to p's process group.
func signalGroup(p *os.Process, sig syscall.Signal) error {
	return syscall.Kill(-p.Pid, sig)
}
