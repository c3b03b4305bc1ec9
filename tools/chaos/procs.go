package chaos

import (
	"context"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"sync"
	"syscall"
	"time"

	"github.com/example/payments/tools/freeport"
)

// proc is one real OS process of the stack: a binary of cmd/ with its
// environment, started, killed with SIGKILL and started again, its output
// appended to one log file across restarts.
//
// Each run of the binary is the leader of a process group of its own, and
// every signal goes to the whole group; on Linux the kernel also SIGKILLs it
// when the chaos process dies, however it dies (procattr_linux.go). At most
// one run of a proc is alive at any time: start kills a run still alive
// before it starts another, so that no process is ever left that the run no
// longer knows of.
type proc struct {
	name, kind string // "api-1", "api"
	bin        string
	args       []string // none for the binaries of the stack
	env        []string
	health     string // URL answering 200 once it serves
	log        *os.File

	// turn is held by whatever takes the process down on purpose for a
	// while (an outage): the killer leaves it alone meanwhile, rather than
	// start it in the middle of the outage.
	turn sync.Mutex

	mu   sync.Mutex
	cmd  *exec.Cmd
	done chan struct{}
}

func newProc(name, kind, bin, logDir, health string, env []string) (*proc, error) {
	log, err := os.OpenFile(filepath.Join(logDir, name+".log"), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return nil, err
	}
	return &proc{name: name, kind: kind, bin: bin, env: env, health: health, log: log}, nil
}

// start runs the process and waits until it serves. A run still alive is
// killed first.
func (p *proc) start(ctx context.Context) error {
	p.mu.Lock()
	if p.cmd != nil && alive(p.done) {
		p.mu.Unlock()
		fmt.Fprintf(p.log, "=== chaos: %s still running before a start: killing it first\n", p.name)
		p.kill()
		p.mu.Lock()
	}
	cmd := exec.Command(p.bin, p.args...)
	cmd.Env = append(os.Environ(), p.env...)
	cmd.Stdout, cmd.Stderr = p.log, p.log
	cmd.SysProcAttr = procAttr()
	if err := cmd.Start(); err != nil {
		p.mu.Unlock()
		return fmt.Errorf("start %s: %w", p.name, err)
	}
	done := make(chan struct{})
	go func() {
		_ = cmd.Wait()
		// Whatever the leader left in its group goes with it. The group
		// cannot have been reused yet: its leader was reaped just now.
		_ = signalGroup(cmd.Process, syscall.SIGKILL)
		close(done)
	}()
	p.cmd, p.done = cmd, done
	p.mu.Unlock()
	fmt.Fprintf(p.log, "=== chaos: started %s (pid %d) at %s\n", p.name, cmd.Process.Pid, time.Now().UTC().Format(time.RFC3339Nano))
	return waitHealthy(ctx, p.health, done)
}

// alive reports whether the run whose done channel this is goes on.
func alive(done chan struct{}) bool {
	select {
	case <-done:
		return false
	default:
		return true
	}
}

// kill sends SIGKILL to the process's group and waits for the process to be
// gone.
func (p *proc) kill() {
	p.mu.Lock()
	cmd, done := p.cmd, p.done
	p.mu.Unlock()
	if cmd == nil {
		return
	}
	if alive(done) {
		_ = signalGroup(cmd.Process, syscall.SIGKILL)
	}
	<-done
	fmt.Fprintf(p.log, "=== chaos: killed %s with SIGKILL at %s\n", p.name, time.Now().UTC().Format(time.RFC3339Nano))
}

// stop sends SIGTERM to the process's group and waits for a graceful exit,
// then SIGKILL.
func (p *proc) stop() {
	p.mu.Lock()
	cmd, done := p.cmd, p.done
	p.mu.Unlock()
	if cmd == nil || !alive(done) {
		return
	}
	_ = signalGroup(cmd.Process, syscall.SIGTERM)
	select {
	case <-done:
	case <-time.After(40 * time.Second):
		_ = signalGroup(cmd.Process, syscall.SIGKILL)
		<-done
	}
	fmt.Fprintf(p.log, "=== chaos: stopped %s at %s\n", p.name, time.Now().UTC().Format(time.RFC3339Nano))
}

// waitHealthy polls url until it answers 200, the process exits, or a
// minute passes.
func waitHealthy(ctx context.Context, url string, exited <-chan struct{}) error {
	client := &http.Client{Timeout: time.Second}
	defer client.CloseIdleConnections()
	deadline := time.Now().Add(time.Minute)
	for {
		if res, err := client.Get(url); err == nil {
			res.Body.Close()
			if res.StatusCode == http.StatusOK {
				return nil
			}
		}
		select {
		case <-exited:
			return fmt.Errorf("%s: the process exited before it served", url)
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(50 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("%s: not healthy within a minute", url)
		}
	}
}

// freePort returns a loopback address whose port is free right now.
func freePort() (string, error) { return freeport.Addr() }
