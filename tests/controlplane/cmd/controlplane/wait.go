package main

import (
	"crypto/tls"
	"crypto/x509"
	"errors"
	"flag"
	"fmt"
	"io"
	"net/http"
	"os"
	"strings"
	"time"
)

// clients talks to the cluster's endpoints as the admin user, trusting only the
// cluster's CA.
type clients struct{ http *http.Client }

func newClients(l layout) (*clients, error) {
	caPEM, err := os.ReadFile(l.pki("ca.crt"))
	if err != nil {
		return nil, err
	}
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(caPEM) {
		return nil, errors.New(l.pki("ca.crt") + ": no certificate")
	}
	cert, err := tls.LoadX509KeyPair(l.pki("admin.crt"), l.pki("admin.key"))
	if err != nil {
		return nil, err
	}
	transport := &http.Transport{
		TLSClientConfig:   &tls.Config{RootCAs: pool, Certificates: []tls.Certificate{cert}, MinVersion: tls.VersionTLS12},
		DisableKeepAlives: true, // each probe is independent; a restarted server must not see stale conns
	}
	return &clients{http: &http.Client{Transport: transport, Timeout: 2 * time.Second}}, nil
}

// get returns the status and (trimmed) body of a GET, or an error.
func (c *clients) get(url string) (int, string, error) {
	resp, err := c.http.Get(url)
	if err != nil {
		return 0, "", err
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(io.LimitReader(resp.Body, 4096))
	return resp.StatusCode, strings.TrimSpace(string(body)), nil
}

func (c *clients) ok(url string) bool {
	status, _, err := c.get(url)
	return err == nil && status == http.StatusOK
}

// check is one readiness condition.
type check struct {
	name string
	url  string
}

func readinessChecks(info clusterInfo) []check {
	p := info.Ports
	return []check{
		{"kube-apiserver /readyz", info.Server + "/readyz"},
		// The default ServiceAccount exists once the controller manager's
		// serviceaccount controller ran: pods can be created from then on.
		{"default ServiceAccount", info.Server + "/api/v1/namespaces/default/serviceaccounts/default"},
		{"kube-controller-manager /healthz", fmt.Sprintf("https://127.0.0.1:%d/healthz", p.ControllerManager)},
		{"kube-scheduler /readyz", fmt.Sprintf("https://127.0.0.1:%d/readyz", p.Scheduler)},
		{"kwok /healthz", fmt.Sprintf("http://127.0.0.1:%d/healthz", p.Kwok)},
	}
}

// runWait blocks until every readiness check passes, or fails with the checks that
// did not, naming the log to read.
func runWait(args []string) int {
	fs := flag.NewFlagSet("wait", flag.ContinueOnError)
	dir := fs.String("dir", "", "cluster directory")
	timeout := fs.Duration("timeout", 60*time.Second, "give up after this long")
	quiet := fs.Bool("quiet", false, "print nothing on success")
	supervisor := fs.Int("pid", 0, "pid of the supervisor just started: ignore a cluster.json left by an earlier one, and fail at once if this process dies")
	if err := fs.Parse(args); err != nil {
		return 2
	}
	if *dir == "" {
		fmt.Fprintln(os.Stderr, "controlplane wait: --dir is required")
		return 2
	}
	l := layout{dir: *dir}
	start := time.Now()
	deadline := start.Add(*timeout)
	var failing []string
	for {
		failing = failing[:0]
		info, err := l.readInfo()
		if *supervisor != 0 && !processAlive(*supervisor) {
			fmt.Fprintf(os.Stderr, "controlplane wait: the supervisor (pid %d) exited; see %s\n",
				*supervisor, l.logFile("controlplane"))
			return 1
		}
		if err == nil && *supervisor != 0 && info.SupervisorPID != *supervisor {
			err = errors.New("the supervisor has not written cluster.json yet")
		}
		if err == nil {
			if !processAlive(info.SupervisorPID) {
				fmt.Fprintf(os.Stderr, "controlplane wait: the supervisor (pid %d) is not running; see %s\n",
					info.SupervisorPID, l.logFile("controlplane"))
				return 1
			}
			var c *clients
			c, err = newClients(l)
			if err == nil {
				for _, chk := range readinessChecks(info) {
					if !c.ok(chk.url) {
						failing = append(failing, chk.name)
					}
				}
				if len(failing) == 0 {
					if !*quiet {
						fmt.Printf("control plane ready at %s (waited %s)\n", info.Server, time.Since(start).Round(time.Millisecond))
					}
					return 0
				}
			}
		}
		if err != nil {
			failing = append(failing, err.Error())
		}
		if time.Now().After(deadline) {
			fmt.Fprintf(os.Stderr, "controlplane wait: not ready after %s: %s (logs in %s)\n",
				*timeout, strings.Join(failing, "; "), l.dir)
			return 1
		}
		time.Sleep(100 * time.Millisecond)
	}
}
