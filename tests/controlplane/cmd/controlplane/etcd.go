package main

import (
	"fmt"
	"net/url"
	"time"

	"go.etcd.io/etcd/server/v3/embed"
)

// startEtcd runs a single-member etcd inside the supervisor process, on loopback, with
// plain HTTP (nothing but the local API server ever connects). fsync is off: the cluster
// is for tests and demos, and a crash loses nothing that matters, while fsync on a busy
// disk would make every write of a 1,000-pod test wait.
func startEtcd(l layout, p ports) (*embed.Etcd, error) {
	client := url.URL{Scheme: "http", Host: fmt.Sprintf("127.0.0.1:%d", p.EtcdClient)}
	peer := url.URL{Scheme: "http", Host: fmt.Sprintf("127.0.0.1:%d", p.EtcdPeer)}
	cfg := embed.NewConfig()
	cfg.Name = "controlplane"
	cfg.Dir = l.etcdDir()
	cfg.ListenClientUrls = []url.URL{client}
	cfg.AdvertiseClientUrls = []url.URL{client}
	cfg.ListenPeerUrls = []url.URL{peer}
	cfg.AdvertisePeerUrls = []url.URL{peer}
	cfg.InitialCluster = cfg.InitialClusterFromName(cfg.Name)
	cfg.Logger = "zap"
	cfg.LogLevel = "warn"
	cfg.LogOutputs = []string{l.logFile("etcd")}
	cfg.UnsafeNoFsync = true
	// A single member elects itself after one election timeout; the default (1s) is
	// a second of every start. Loopback round trips allow far shorter ticks.
	cfg.TickMs = 10
	cfg.ElectionMs = 100
	// NewConfig leaves this 0, which logs every request as "expensive".
	cfg.WarningUnaryRequestDuration = time.Second
	e, err := embed.StartEtcd(cfg)
	if err != nil {
		return nil, fmt.Errorf("etcd: %w", err)
	}
	select {
	case <-e.Server.ReadyNotify():
		return e, nil
	case err := <-e.Err():
		e.Close()
		return nil, fmt.Errorf("etcd: %w", err)
	case <-time.After(60 * time.Second):
		e.Close()
		return nil, fmt.Errorf("etcd: not ready after 60s (see %s)", l.logFile("etcd"))
	}
}
