// Command k8s is one multi-call binary for the real node (provingground/node/, benchmarks/gpu/node/README.md):
// etcd, kube-apiserver, kube-controller-manager, kube-scheduler, kubelet, kube-proxy and kubectl, each the
// upstream command of k8s.io/kubernetes (and go.etcd.io/etcd/server/v3) linked unchanged, as k3s
// does. One binary shares the Go runtime, client-go and apimachinery between the seven, so it is
// about a third of their separate sizes: what is sent to the GPU machine per call is limited.
//
// It dispatches on the name it was started as (copy or hard-link it to kubelet, kubectl, ...;
// not a symlink where a component re-executes itself) or, failing that, on its first argument:
//
//	k8s kubelet --config ...   ==   kubelet --config ...
package main

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	_ "time/tzdata" // for CronJob time zones (kube-apiserver, kube-controller-manager)

	"go.etcd.io/etcd/server/v3/etcdmain"
	_ "k8s.io/client-go/plugin/pkg/client/auth" // kubectl's client auth plugins
	"k8s.io/component-base/cli"
	"k8s.io/component-base/logs"
	_ "k8s.io/component-base/logs/json/register"          // JSON log format
	_ "k8s.io/component-base/metrics/prometheus/clientgo" // client-go metrics
	_ "k8s.io/component-base/metrics/prometheus/version"  // version metric
	kubectl "k8s.io/kubectl/pkg/cmd"
	kubectlutil "k8s.io/kubectl/pkg/cmd/util"
	apiserver "k8s.io/kubernetes/cmd/kube-apiserver/app"
	controllermanager "k8s.io/kubernetes/cmd/kube-controller-manager/app"
	proxy "k8s.io/kubernetes/cmd/kube-proxy/app"
	scheduler "k8s.io/kubernetes/cmd/kube-scheduler/app"
	kubelet "k8s.io/kubernetes/cmd/kubelet/app"
)

// Each entry is the body of that command's upstream main().
var commands = map[string]func() int{
	"etcd":           func() int { etcdmain.Main(os.Args); return 0 },
	"kube-apiserver": func() int { return cli.Run(apiserver.NewAPIServerCommand()) },
	"kube-controller-manager": func() int {
		return cli.Run(controllermanager.NewControllerManagerCommand())
	},
	"kube-scheduler": func() int { return cli.Run(scheduler.NewSchedulerCommand()) },
	"kubelet":        func() int { return cli.Run(kubelet.NewKubeletCommand(context.Background())) },
	"kube-proxy":     func() int { return cli.Run(proxy.NewProxyCommand()) },
	"kubectl": func() int {
		logs.GlogSetter(kubectl.GetLogVerbosity(os.Args)) //nolint:errcheck
		if err := cli.RunNoErrOutput(kubectl.NewDefaultKubectlCommand()); err != nil {
			kubectlutil.CheckErr(err)
		}
		return 0
	},
}

func main() {
	if run, ok := commands[filepath.Base(os.Args[0])]; ok {
		os.Exit(run())
	}
	if len(os.Args) > 1 {
		if run, ok := commands[os.Args[1]]; ok {
			os.Args = os.Args[1:]
			os.Exit(run())
		}
	}
	names := make([]string, 0, len(commands))
	for name := range commands {
		names = append(names, name)
	}
	sort.Strings(names)
	fmt.Fprintf(os.Stderr, "usage: %s COMMAND [ARGS...], or start it as COMMAND; COMMAND is one of %v\n",
		filepath.Base(os.Args[0]), names)
	os.Exit(2)
}
