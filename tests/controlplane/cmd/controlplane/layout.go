package main

import (
	"encoding/json"
	"fmt"
	"net"
	"os"
	"path/filepath"
)

// layout names every file of a cluster directory. The directory is the cluster's whole
// state: delete it (after stopping) and the cluster is gone.
//
//	cluster.json                  endpoints and ports (read by `wait`, scripts and tests)
//	admin.kubeconfig              system:masters; also <component>.kubeconfig
//	pki/                          ca.crt ca.key sa.key sa.pub and the leaf certificates
//	etcd/                         etcd's data
//	scheduler-config.yaml, kwok-config.yaml
//	<name>.pid, <name>.log        for controlplane (the supervisor), etcd, apiserver,
//	                              controller-manager, scheduler, kwok
type layout struct{ dir string }

func (l layout) path(parts ...string) string {
	return filepath.Join(append([]string{l.dir}, parts...)...)
}
func (l layout) pki(name string) string        { return l.path("pki", name) }
func (l layout) kubeconfig(name string) string { return l.path(name + ".kubeconfig") }
func (l layout) pidFile(name string) string    { return l.path(name + ".pid") }
func (l layout) logFile(name string) string    { return l.path(name + ".log") }
func (l layout) clusterFile() string           { return l.path("cluster.json") }
func (l layout) schedulerConfig() string       { return l.path("scheduler-config.yaml") }
func (l layout) kwokConfig() string            { return l.path("kwok-config.yaml") }
func (l layout) etcdDir() string               { return l.path("etcd") }

// ports are the loopback ports one cluster listens on. They are picked free at the first
// start and reused by later starts of the same directory while they stay free.
type ports struct {
	APIServer         int `json:"apiserver"`
	EtcdClient        int `json:"etcdClient"`
	EtcdPeer          int `json:"etcdPeer"`
	ControllerManager int `json:"controllerManager"`
	Scheduler         int `json:"scheduler"`
	Kwok              int `json:"kwok"`
}

// clusterInfo is cluster.json.
type clusterInfo struct {
	Server        string `json:"server"`
	Kubeconfig    string `json:"kubeconfig"`
	SupervisorPID int    `json:"supervisorPID"`
	Ports         ports  `json:"ports"`
}

func (l layout) readInfo() (clusterInfo, error) {
	var info clusterInfo
	raw, err := os.ReadFile(l.clusterFile())
	if err != nil {
		return info, err
	}
	if err := json.Unmarshal(raw, &info); err != nil {
		return info, fmt.Errorf("%s: %w", l.clusterFile(), err)
	}
	return info, nil
}

func (l layout) writeInfo(info clusterInfo) error {
	raw, err := json.MarshalIndent(info, "", "  ")
	if err != nil {
		return err
	}
	return writeFileAtomic(l.clusterFile(), append(raw, '\n'), 0o644)
}

// choosePorts keeps every previously used port that is still free (and the requested
// API server port, if any) and picks fresh free ports for the rest. All candidate
// listeners are held open until every port is chosen, so no port is picked twice.
func choosePorts(previous ports, apiserverPort int) (ports, error) {
	var held []net.Listener
	defer func() {
		for _, l := range held {
			_ = l.Close()
		}
	}()
	pick := func(want int, required bool) (int, error) {
		if want != 0 {
			l, err := net.Listen("tcp", fmt.Sprintf("127.0.0.1:%d", want))
			if err == nil {
				held = append(held, l)
				return want, nil
			}
			if required {
				return 0, fmt.Errorf("port %d on 127.0.0.1 is taken: %w", want, err)
			}
		}
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			return 0, err
		}
		held = append(held, l)
		return l.Addr().(*net.TCPAddr).Port, nil
	}
	var p ports
	var err error
	if apiserverPort != 0 {
		p.APIServer, err = pick(apiserverPort, true)
	} else {
		p.APIServer, err = pick(previous.APIServer, false)
	}
	if err != nil {
		return p, err
	}
	for _, f := range []struct {
		dst  *int
		prev int
	}{
		{&p.EtcdClient, previous.EtcdClient},
		{&p.EtcdPeer, previous.EtcdPeer},
		{&p.ControllerManager, previous.ControllerManager},
		{&p.Scheduler, previous.Scheduler},
		{&p.Kwok, previous.Kwok},
	} {
		if *f.dst, err = pick(f.prev, false); err != nil {
			return p, err
		}
	}
	return p, nil
}
