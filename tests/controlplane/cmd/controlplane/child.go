package main

import (
	"fmt"
	"log"
	"os"
	"os/exec"
	"runtime"
	"strconv"
	"sync"
	"syscall"
	"time"
)

// child keeps one component running: it starts the process, records its pid, waits,
// and starts it again when it exits while the supervisor is not stopping. A test kills
// the API server by the pid in apiserver.pid; the new process comes back on the same
// port with the same certificates.
type child struct {
	comp component
	s    *supervisor
	done chan struct{} // closed when run returns

	mu  sync.Mutex
	cmd *exec.Cmd
}

func (c *child) run() {
	defer close(c.done)
	backoff := 250 * time.Millisecond
	for !c.s.isStopping() {
		started := time.Now()
		err := c.once()
		if c.s.isStopping() {
			return
		}
		ran := time.Since(started)
		if ran > 10*time.Second {
			backoff = 100 * time.Millisecond // a crash after a good run: come back at once
		}
		log.Printf("%s exited after %s (%v); restarting in %s", c.comp.name, ran.Round(time.Millisecond), err, backoff)
		select {
		case <-c.s.stopped:
			return
		case <-time.After(backoff):
		}
		backoff = min(backoff*2, 5*time.Second)
	}
}

// once runs the component until it exits.
func (c *child) once() error {
	path := c.comp.path
	args := c.comp.args
	if path == "" {
		path = c.s.self
		args = append([]string{c.comp.name}, args...)
	}
	logf, err := os.OpenFile(c.s.l.logFile(c.comp.name), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return err
	}
	defer logf.Close()
	cmd := exec.Command(path, args...)
	cmd.Stdout, cmd.Stderr = logf, logf
	cmd.SysProcAttr = &syscall.SysProcAttr{
		// Own process group: a Ctrl-C on the terminal reaches the supervisor only,
		// which then stops the children in order.
		Setpgid: true,
		// If the supervisor dies without stopping us (SIGKILL), die too.
		Pdeathsig: syscall.SIGKILL,
	}
	c.mu.Lock()
	if c.s.isStopping() {
		c.mu.Unlock()
		return nil
	}
	if err := c.s.spawner.start(cmd); err != nil {
		c.mu.Unlock()
		return err
	}
	c.cmd = cmd
	c.mu.Unlock()
	pidFile := c.s.l.pidFile(c.comp.name)
	if err := writeFileAtomic(pidFile, []byte(strconv.Itoa(cmd.Process.Pid)+"\n"), 0o644); err != nil {
		log.Printf("%s: %v", pidFile, err)
	}
	err = cmd.Wait()
	c.mu.Lock()
	c.cmd = nil
	c.mu.Unlock()
	return err
}

// terminate sends SIGTERM, then SIGKILL after grace, and waits for run to return.
// Callers set supervisor.stopping first, so the child is not restarted.
func (c *child) terminate(grace time.Duration) {
	c.signal(syscall.SIGTERM)
	select {
	case <-c.done:
		return
	case <-time.After(grace):
	}
	log.Printf("%s did not stop within %s: killing it", c.comp.name, grace)
	c.signal(syscall.SIGKILL)
	<-c.done
}

func (c *child) signal(sig syscall.Signal) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.cmd != nil && c.cmd.Process != nil {
		_ = c.cmd.Process.Signal(sig)
	}
}

// spawner starts every child from one OS thread that lives as long as the process.
// Pdeathsig fires when the *thread* that forked the child exits, and the Go runtime
// may retire ordinary threads; a locked thread that never exits makes Pdeathsig mean
// "when the supervisor dies".
type spawner struct{ reqs chan spawnRequest }

type spawnRequest struct {
	cmd  *exec.Cmd
	done chan error
}

func newSpawner() *spawner {
	s := &spawner{reqs: make(chan spawnRequest)}
	go func() {
		runtime.LockOSThread() // never unlocked: the thread must outlive every child
		for r := range s.reqs {
			r.done <- r.cmd.Start()
		}
	}()
	return s
}

func (s *spawner) start(cmd *exec.Cmd) error {
	done := make(chan error, 1)
	s.reqs <- spawnRequest{cmd: cmd, done: done}
	if err := <-done; err != nil {
		return fmt.Errorf("start %s: %w", cmd.Path, err)
	}
	return nil
}
