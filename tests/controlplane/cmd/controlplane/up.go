package main

import (
	"errors"
	"flag"
	"fmt"
	"log"
	"os"
	"os/signal"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"
)

// runUp is the supervisor: it prepares the directory, runs etcd in-process, spawns the
// components as child processes, restarts any child that exits, and on SIGTERM/SIGINT
// (or when --exit-with's process is gone) stops the children, then etcd, and exits 0.
func runUp(args []string) int {
	fs := flag.NewFlagSet("up", flag.ContinueOnError)
	dir := fs.String("dir", "", "cluster directory (created if missing; reused if it holds a stopped cluster)")
	port := fs.Int("port", 0, "API server port on 127.0.0.1 (default: a free one, or the one this directory used before)")
	kwokBin := fs.String("kwok", "", "kwok executable (default: kwok beside this binary)")
	exitWith := fs.Int("exit-with", 0, "stop the cluster when the process with this pid exits")
	if err := fs.Parse(args); err != nil {
		return 2
	}
	if *dir == "" {
		fmt.Fprintln(os.Stderr, "controlplane up: --dir is required")
		return 2
	}
	log.SetPrefix("controlplane: ")
	log.SetFlags(log.LstdFlags | log.Lmicroseconds)
	s, err := newSupervisor(*dir, *kwokBin)
	if err != nil {
		log.Print(err)
		return 1
	}
	if err := s.claim(); err != nil {
		log.Print(err)
		return 1
	}
	if err := s.start(*port); err != nil {
		log.Printf("start failed: %v", err)
		s.stop()
		return 1
	}
	s.waitForShutdown(*exitWith)
	s.stop()
	return 0
}

type supervisor struct {
	l        layout
	self     string
	kwokBin  string
	spawner  *spawner
	mu       sync.Mutex
	stopping bool
	stopped  chan struct{} // closed when stopping begins; interrupts restart back-off
	children []*child
	etcd     interface{ Close() }
	shutdown chan os.Signal
	lock     *os.File // DIR/.lock, flocked while this supervisor lives
}

func newSupervisor(dir, kwokBin string) (*supervisor, error) {
	abs, err := filepath.Abs(dir)
	if err != nil {
		return nil, err
	}
	if err := os.MkdirAll(abs, 0o755); err != nil {
		return nil, err
	}
	self, err := os.Executable()
	if err != nil {
		return nil, err
	}
	if kwokBin == "" {
		kwokBin = filepath.Join(filepath.Dir(self), "kwok")
	}
	s := &supervisor{
		l: layout{dir: abs}, self: self, kwokBin: kwokBin,
		spawner: newSpawner(), stopped: make(chan struct{}),
		shutdown: make(chan os.Signal, 2),
	}
	// Catch signals before anything is started, so an early Ctrl-C still cleans up.
	signal.Notify(s.shutdown, syscall.SIGTERM, syscall.SIGINT)
	return s, nil
}

// claim makes this process the directory's only supervisor: an exclusive lock on
// DIR/.lock, held (never released explicitly) until the process exits.
func (s *supervisor) claim() error {
	f, err := os.OpenFile(s.l.path(".lock"), os.O_CREATE|os.O_RDWR, 0o644)
	if err != nil {
		return err
	}
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB); err != nil {
		pid, _ := readPid(s.l.pidFile("controlplane"))
		return fmt.Errorf("a control plane (pid %d) already runs in %s", pid, s.l.dir)
	}
	s.lock = f
	return writeFileAtomic(s.l.pidFile("controlplane"), []byte(strconv.Itoa(os.Getpid())+"\n"), 0o644)
}

func (s *supervisor) start(apiserverPort int) error {
	t0 := time.Now()
	previous, _ := s.l.readInfo()
	p, err := choosePorts(previous.Ports, apiserverPort)
	if err != nil {
		return err
	}
	if err := prepare(s.l, p, s.kwokBin); err != nil {
		return err
	}
	info := clusterInfo{
		Server:        fmt.Sprintf("https://127.0.0.1:%d", p.APIServer),
		Kubeconfig:    s.l.kubeconfig("admin"),
		SupervisorPID: os.Getpid(),
		Ports:         p,
	}
	if err := s.l.writeInfo(info); err != nil {
		return err
	}
	e, err := startEtcd(s.l, p)
	if err != nil {
		return err
	}
	s.etcd = e
	log.Printf("etcd ready on 127.0.0.1:%d after %s", p.EtcdClient, time.Since(t0).Round(time.Millisecond))

	// The API server first, so the others do not spend their start retrying it.
	s.spawn(apiserverComponent(s.l, p))
	c, err := newClients(s.l)
	if err != nil {
		return err
	}
	deadline := time.Now().Add(90 * time.Second)
	for !c.ok(info.Server + "/readyz") {
		if time.Now().After(deadline) {
			return fmt.Errorf("API server not ready after 90s (see %s)", s.l.logFile("apiserver"))
		}
		select {
		case sig := <-s.shutdown:
			return fmt.Errorf("interrupted by %s", sig)
		case <-time.After(100 * time.Millisecond):
		}
	}
	log.Printf("API server ready at %s after %s", info.Server, time.Since(t0).Round(time.Millisecond))
	s.spawn(controllerManagerComponent(s.l, p))
	s.spawn(schedulerComponent(s.l, p))
	s.spawn(kwokComponent(s.l, p, s.kwokBin))
	log.Printf("all components started; admin kubeconfig: %s", info.Kubeconfig)
	return nil
}

// waitForShutdown blocks until SIGTERM/SIGINT, or until the process --exit-with names
// is gone (so a test session that dies without cleaning up does not leak a cluster).
func (s *supervisor) waitForShutdown(exitWith int) {
	var orphaned <-chan time.Time
	var tick *time.Ticker
	if exitWith > 0 {
		tick = time.NewTicker(time.Second)
		defer tick.Stop()
		orphaned = tick.C
	}
	for {
		select {
		case sig := <-s.shutdown:
			log.Printf("%s: stopping", sig)
			return
		case <-orphaned:
			if !processAlive(exitWith) {
				log.Printf("process %d is gone: stopping", exitWith)
				return
			}
		}
	}
}

// stop ends the children (clients of the API server first, then the API server) and
// then etcd. Each child gets SIGTERM and, after a grace period, SIGKILL.
func (s *supervisor) stop() {
	s.mu.Lock()
	if s.stopping {
		s.mu.Unlock()
		return
	}
	s.stopping = true
	close(s.stopped)
	children := append([]*child(nil), s.children...)
	s.mu.Unlock()

	var first, last []*child
	for _, c := range children {
		if c.comp.name == "apiserver" {
			last = append(last, c)
		} else {
			first = append(first, c)
		}
	}
	stopAll(first, 10*time.Second)
	stopAll(last, 15*time.Second)
	if s.etcd != nil {
		s.etcd.Close()
	}
	for _, c := range children {
		_ = os.Remove(s.l.pidFile(c.comp.name))
	}
	_ = os.Remove(s.l.pidFile("controlplane"))
	log.Print("stopped")
}

func stopAll(children []*child, grace time.Duration) {
	var wg sync.WaitGroup
	for _, c := range children {
		wg.Add(1)
		go func() {
			defer wg.Done()
			c.terminate(grace)
		}()
	}
	wg.Wait()
}

func (s *supervisor) spawn(comp component) {
	c := &child{comp: comp, s: s, done: make(chan struct{})}
	s.mu.Lock()
	s.children = append(s.children, c)
	s.mu.Unlock()
	go c.run()
}

func (s *supervisor) isStopping() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.stopping
}

func readPid(path string) (int, bool) {
	raw, err := os.ReadFile(path)
	if err != nil {
		return 0, false
	}
	pid, err := strconv.Atoi(strings.TrimSpace(string(raw)))
	return pid, err == nil && pid > 0
}

func processAlive(pid int) bool {
	err := syscall.Kill(pid, 0)
	return err == nil || errors.Is(err, syscall.EPERM)
}
