// Command kwok runs sigs.k8s.io/kwok's controller (the kubelet of fake nodes) for the
// local control plane, plus one helper subcommand, `write-config FILE`, that writes the
// kwok config file the control plane starts it with: a KwokConfiguration with raised
// parallelism and kwok's own default stages (node-initialize, node-heartbeat-with-lease,
// pod-ready, pod-complete, pod-delete), taken from the kwok module itself so they always
// match the kwok version built here.
package main

import (
	"encoding/json"
	"fmt"
	"os"
	"strings"

	"github.com/spf13/pflag"

	nodefast "sigs.k8s.io/kwok/kustomize/stage/node/fast"
	nodeheartbeatwithlease "sigs.k8s.io/kwok/kustomize/stage/node/heartbeat-with-lease"
	podfast "sigs.k8s.io/kwok/kustomize/stage/pod/fast"
	configv1alpha1 "sigs.k8s.io/kwok/pkg/apis/config/v1alpha1"
	"sigs.k8s.io/kwok/pkg/config"
	"sigs.k8s.io/kwok/pkg/kwok/cmd"
	"sigs.k8s.io/kwok/pkg/log"
	"sigs.k8s.io/kwok/pkg/utils/signals"
)

func main() {
	if len(os.Args) == 3 && os.Args[1] == "write-config" {
		if err := writeConfig(os.Args[2]); err != nil {
			fmt.Fprintln(os.Stderr, "kwok write-config:", err)
			os.Exit(1)
		}
		return
	}
	os.Exit(run())
}

// writeConfig writes the configuration and the default stages kwokctl also installs for
// a cluster whose nodes renew leases: a fake node becomes Ready at once and keeps its
// Lease fresh (so the node-lifecycle controller never marks it NotReady), and a pod bound
// to it becomes Running, completes when it is a Job pod, and is removed once it has a
// deletionTimestamp.
func writeConfig(path string) error {
	conf, err := configuration()
	if err != nil {
		return err
	}
	docs := []string{
		conf,
		nodefast.DefaultNodeInit,
		nodeheartbeatwithlease.DefaultNodeHeartbeatWithLease,
		podfast.DefaultPodReady,
		podfast.DefaultPodComplete,
		podfast.DefaultPodDelete,
	}
	for i, d := range docs {
		docs[i] = strings.TrimSpace(d)
	}
	return os.WriteFile(path, []byte(strings.Join(docs, "\n---\n")+"\n"), 0o644)
}

// configuration is kwok's defaulted KwokConfiguration with more workers: tests create
// a thousand pods at once and the default of four would make kwok the bottleneck. (kwok's
// API client has no client-side rate limit, so QPS needs no raising.)
func configuration() (string, error) {
	conf := &configv1alpha1.KwokConfiguration{}
	configv1alpha1.SetObjectDefaults_KwokConfiguration(conf)
	conf.APIVersion = configv1alpha1.GroupVersion.String()
	conf.Kind = configv1alpha1.KwokConfigurationKind
	conf.Options.PodPlayStageParallelism = 16
	conf.Options.NodePlayStageParallelism = 8
	conf.Options.NodeLeaseParallelism = 8
	conf.Options.PodsOnNodeSyncParallelism = 4
	raw, err := json.Marshal(conf)
	return string(raw), err
}

// run mirrors sigs.k8s.io/kwok/cmd/kwok: global flags (logging, --config) first, then
// kwok's root command.
func run() int {
	flagset := pflag.NewFlagSet("global", pflag.ContinueOnError)
	flagset.ParseErrorsAllowlist.UnknownFlags = true
	flagset.Usage = func() {}

	ctx := signals.SetupSignalContext()
	ctx, logger := log.InitFlags(ctx, flagset)
	ctx, err := config.InitFlags(ctx, flagset)
	if err != nil {
		logger.Error("Init config flags", "err", err)
		return 1
	}
	command := cmd.NewCommand(ctx)
	command.PersistentFlags().AddFlagSet(flagset)
	if err := command.ExecuteContext(ctx); err != nil {
		logger.Error("Execute exit", "err", err)
		return 1
	}
	return 0
}
