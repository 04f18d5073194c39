// Command controlplane runs a real, local Kubernetes control plane for karpy's tests
// and demo: etcd (embedded), kube-apiserver, kube-controller-manager and
// kube-scheduler from the k8s.io/kubernetes module, plus kwok as the kubelet of fake
// nodes. See tests/controlplane/README.md.
//
// One binary plays every part; the subcommand picks which:
//
//	controlplane up --dir DIR [--port N] [--exit-with PID]   the supervisor
//	controlplane wait --dir DIR [--timeout 60s]              block until the cluster is ready
//	controlplane kubectl ARGS...                             kubectl, built from k8s.io/kubectl
//	controlplane apiserver|controller-manager|scheduler ARGS  one component (spawned by up)
//
// Each component runs in its own process so the components' global state (flags,
// metrics registries, feature gates) never clashes, and so a test can kill the API
// server alone and watch the supervisor bring it back.
package main

import (
	"fmt"
	"os"

	"github.com/spf13/cobra"
	"k8s.io/component-base/cli"
	"k8s.io/component-base/logs"
	_ "k8s.io/component-base/logs/json/register"          // JSON log format, as in the upstream mains
	_ "k8s.io/component-base/metrics/prometheus/clientgo" // client-go metrics, as in the upstream mains
	_ "k8s.io/component-base/metrics/prometheus/version"  // version metric, as in the upstream mains
	kubectlcmd "k8s.io/kubectl/pkg/cmd"
	kubectlutil "k8s.io/kubectl/pkg/cmd/util"
	apiserver "k8s.io/kubernetes/cmd/kube-apiserver/app"
	controllermanager "k8s.io/kubernetes/cmd/kube-controller-manager/app"
	scheduler "k8s.io/kubernetes/cmd/kube-scheduler/app"

	_ "time/tzdata" // CronJob time zones, as in the upstream mains
)

const usage = `usage:
  controlplane up --dir DIR [--port N] [--kwok PATH] [--exit-with PID]
  controlplane wait --dir DIR [--timeout DURATION]
  controlplane kubectl ARGS...
  controlplane apiserver|controller-manager|scheduler ARGS...   (spawned by up)
`

func main() {
	if len(os.Args) < 2 {
		fmt.Fprint(os.Stderr, usage)
		os.Exit(2)
	}
	sub, args := os.Args[1], os.Args[2:]
	switch sub {
	case "up":
		os.Exit(runUp(args))
	case "wait":
		os.Exit(runWait(args))
	case "kubectl":
		runKubectl(args)
	case "apiserver":
		runComponent("kube-apiserver", apiserver.NewAPIServerCommand(), args)
	case "controller-manager":
		runComponent("kube-controller-manager", controllermanager.NewControllerManagerCommand(), args)
	case "scheduler":
		runComponent("kube-scheduler", scheduler.NewSchedulerCommand(), args)
	case "-h", "--help", "help":
		fmt.Print(usage)
	default:
		fmt.Fprintf(os.Stderr, "controlplane: unknown subcommand %q\n%s", sub, usage)
		os.Exit(2)
	}
}

// runComponent runs an upstream component command exactly as its own main does. os.Args
// is rewritten because cobra and the components read it directly.
func runComponent(name string, command *cobra.Command, args []string) {
	os.Args = append([]string{name}, args...)
	command.SetArgs(args)
	os.Exit(cli.Run(command))
}

// runKubectl mirrors k8s.io/kubernetes/cmd/kubectl.
func runKubectl(args []string) {
	os.Args = append([]string{"kubectl"}, args...)
	logs.GlogSetter(kubectlcmd.GetLogVerbosity(os.Args)) //nolint:errcheck // as upstream
	command := kubectlcmd.NewDefaultKubectlCommand()
	if err := cli.RunNoErrOutput(command); err != nil {
		kubectlutil.CheckErr(err)
	}
	os.Exit(0)
}
