package main

import (
	"fmt"
	"net"
	"os"
	"os/exec"
	"strconv"
)

const (
	serviceCIDR = "10.96.0.0/16"
	serviceIP   = "10.96.0.1" // the `kubernetes` Service: first address of serviceCIDR
	// podCIDR is where kwok draws pod IPs for nodes without spec.podCIDR; a /16 so a
	// thousands-of-pods test does not run out (kwok's default is a /24).
	podCIDR = "10.244.0.1/16"
	// kwokNodeAnnotation selects the nodes kwok plays the kubelet for; other nodes are
	// left alone.
	kwokNodeAnnotation = "kwok.x-k8s.io/node=fake"
	// Client rate limits of the controller manager and the scheduler: high enough that
	// a test creating 1,000+ pods waits on the API server, not on them.
	clientQPS   = 500
	clientBurst = 1000
	// spreadScheduler is the scheduler name of the second kube-scheduler profile,
	// whose default topology spread constraints spread its pods over the zones.
	spreadScheduler = "karpy-e2e-spread"
)

// component is one child process of the supervisor.
type component struct {
	name string
	path string // executable; "" means the controlplane binary itself
	args []string
}

// prepare writes every certificate, kubeconfig and config file the components read.
func prepare(l layout, p ports, kwokBin string) error {
	pkiDir := l.path("pki")
	if err := os.MkdirAll(pkiDir, 0o700); err != nil {
		return err
	}
	ca, err := loadOrCreateCA(pkiDir, "ca")
	if err != nil {
		return fmt.Errorf("CA: %w", err)
	}
	frontProxyCA, err := loadOrCreateCA(pkiDir, "front-proxy-ca")
	if err != nil {
		return fmt.Errorf("front-proxy CA: %w", err)
	}
	if err := frontProxyCA.issue(pkiDir, "front-proxy-client", certSpec{commonName: "front-proxy-client"}); err != nil {
		return fmt.Errorf("certificate front-proxy-client: %w", err)
	}
	loopback := []net.IP{net.ParseIP("127.0.0.1")}
	certs := map[string]certSpec{
		"apiserver": {
			commonName: "kube-apiserver", server: true,
			dnsNames: []string{"localhost", "kubernetes", "kubernetes.default", "kubernetes.default.svc",
				"kubernetes.default.svc.cluster.local"},
			ips: []net.IP{net.ParseIP("127.0.0.1"), net.ParseIP(serviceIP)},
		},
		"controller-manager-serving": {commonName: "kube-controller-manager", server: true, dnsNames: []string{"localhost"}, ips: loopback},
		"scheduler-serving":          {commonName: "kube-scheduler", server: true, dnsNames: []string{"localhost"}, ips: loopback},
		// Client identities. The controller manager and scheduler use the users the
		// default RBAC bootstrap policy grants; kwok plays the kubelet of many nodes,
		// which the Node authorizer would refuse to one identity, so it is an admin.
		"admin":              {commonName: "kubernetes-admin", organization: []string{"system:masters"}},
		"controller-manager": {commonName: "system:kube-controller-manager"},
		"scheduler":          {commonName: "system:kube-scheduler"},
		"kwok":               {commonName: "kwok-controller", organization: []string{"system:masters"}},
	}
	for name, spec := range certs {
		if err := ca.issue(pkiDir, name, spec); err != nil {
			return fmt.Errorf("certificate %s: %w", name, err)
		}
	}
	if err := ensureServiceAccountKey(pkiDir); err != nil {
		return fmt.Errorf("service-account key: %w", err)
	}
	server := fmt.Sprintf("https://127.0.0.1:%d", p.APIServer)
	for _, user := range []string{"admin", "controller-manager", "scheduler", "kwok"} {
		err := writeKubeconfig(l.kubeconfig(user), server, user, ca.pem,
			l.pki(user+".crt"), l.pki(user+".key"))
		if err != nil {
			return fmt.Errorf("kubeconfig %s: %w", user, err)
		}
	}
	schedulerConfig := fmt.Sprintf(`apiVersion: kubescheduler.config.k8s.io/v1
kind: KubeSchedulerConfiguration
clientConnection:
  kubeconfig: %s
  qps: %d
  burst: %d
leaderElection:
  leaderElect: false
profiles:
- schedulerName: default-scheduler
# A second profile, as a cluster running a second scheduler has: its pods (and only
# its pods) are spread over the zones by default (tests/e2e/test_default_spread_e2e.py).
- schedulerName: %s
  pluginConfig:
  - name: PodTopologySpread
    args:
      defaultingType: List
      defaultConstraints:
      - maxSkew: 1
        minDomains: 3
        topologyKey: topology.kubernetes.io/zone
        whenUnsatisfiable: DoNotSchedule
`, strconv.Quote(l.kubeconfig("scheduler")), clientQPS, clientBurst, spreadScheduler)
	if err := writeFileAtomic(l.schedulerConfig(), []byte(schedulerConfig), 0o644); err != nil {
		return err
	}
	out, err := exec.Command(kwokBin, "write-config", l.kwokConfig()).CombinedOutput()
	if err != nil {
		return fmt.Errorf("%s write-config: %w: %s", kwokBin, err, out)
	}
	return nil
}

func apiserverComponent(l layout, p ports) component {
	return component{name: "apiserver", args: []string{
		"--etcd-servers=" + fmt.Sprintf("http://127.0.0.1:%d", p.EtcdClient),
		"--bind-address=127.0.0.1",
		"--advertise-address=127.0.0.1",
		"--secure-port=" + strconv.Itoa(p.APIServer),
		"--tls-cert-file=" + l.pki("apiserver.crt"),
		"--tls-private-key-file=" + l.pki("apiserver.key"),
		"--client-ca-file=" + l.pki("ca.crt"),
		// The aggregation layer's identity. Without it, every delegating component
		// (controller manager, scheduler) logs a missing request-header CA forever.
		"--requestheader-client-ca-file=" + l.pki("front-proxy-ca.crt"),
		"--requestheader-allowed-names=front-proxy-client",
		"--requestheader-username-headers=X-Remote-User",
		"--requestheader-group-headers=X-Remote-Group",
		"--requestheader-extra-headers-prefix=X-Remote-Extra-",
		"--proxy-client-cert-file=" + l.pki("front-proxy-client.crt"),
		"--proxy-client-key-file=" + l.pki("front-proxy-client.key"),
		"--authorization-mode=Node,RBAC",
		"--service-account-issuer=https://kubernetes.default.svc.cluster.local",
		"--service-account-key-file=" + l.pki("sa.pub"),
		"--service-account-signing-key-file=" + l.pki("sa.key"),
		"--service-cluster-ip-range=" + serviceCIDR,
		"--allow-privileged=true",
		// The `kubernetes` Service would point at 127.0.0.1, which Endpoints reject;
		// nothing runs inside this cluster that needs it.
		"--endpoint-reconciler-type=none",
		// Tests create thousands of objects at once.
		"--max-requests-inflight=1000",
		"--max-mutating-requests-inflight=500",
		"--profiling=false",
	}}
}

func controllerManagerComponent(l layout, p ports) component {
	kubeconfig := l.kubeconfig("controller-manager")
	return component{name: "controller-manager", args: []string{
		"--kubeconfig=" + kubeconfig,
		"--authentication-kubeconfig=" + kubeconfig,
		"--authorization-kubeconfig=" + kubeconfig,
		"--bind-address=127.0.0.1",
		"--secure-port=" + strconv.Itoa(p.ControllerManager),
		"--tls-cert-file=" + l.pki("controller-manager-serving.crt"),
		"--tls-private-key-file=" + l.pki("controller-manager-serving.key"),
		"--kube-api-qps=" + strconv.Itoa(clientQPS),
		"--kube-api-burst=" + strconv.Itoa(clientBurst),
		"--use-service-account-credentials=true",
		"--service-account-private-key-file=" + l.pki("sa.key"),
		"--root-ca-file=" + l.pki("ca.crt"),
		"--cluster-signing-cert-file=" + l.pki("ca.crt"),
		"--cluster-signing-key-file=" + l.pki("ca.key"),
		"--service-cluster-ip-range=" + serviceCIDR,
		"--leader-elect=false",
		// Keep the (unused) FlexVolume probe inside the cluster directory instead of
		// letting it create /usr/libexec/kubernetes.
		"--flex-volume-plugin-dir=" + l.path("flexvolume"),
		"--concurrent-deployment-syncs=10",
		"--concurrent-replicaset-syncs=10",
		"--concurrent-gc-syncs=40",
		"--profiling=false",
	}}
}

func schedulerComponent(l layout, p ports) component {
	kubeconfig := l.kubeconfig("scheduler")
	return component{name: "scheduler", args: []string{
		"--config=" + l.schedulerConfig(),
		"--authentication-kubeconfig=" + kubeconfig,
		"--authorization-kubeconfig=" + kubeconfig,
		"--bind-address=127.0.0.1",
		"--secure-port=" + strconv.Itoa(p.Scheduler),
		"--tls-cert-file=" + l.pki("scheduler-serving.crt"),
		"--tls-private-key-file=" + l.pki("scheduler-serving.key"),
		"--profiling=false",
	}}
}

func kwokComponent(l layout, p ports, kwokBin string) component {
	return component{name: "kwok", path: kwokBin, args: []string{
		"--config=" + l.kwokConfig(),
		"--kubeconfig=" + l.kubeconfig("kwok"),
		"--manage-nodes-with-annotation-selector=" + kwokNodeAnnotation,
		"--cidr=" + podCIDR,
		"--node-lease-duration-seconds=40",
		"--server-address=" + fmt.Sprintf("127.0.0.1:%d", p.Kwok),
	}}
}
