// Command dra-gpu-plugin is a small DRA kubelet plugin for NVIDIA GPUs, driver gpu.nvidia.com: the
// proving ground's stand-in for NVIDIA's DRA driver (sigs.k8s.io/dra-driver-nvidia-gpu), whose
// Go module the module proxy refuses here ("403 Forbidden: This module version is not
// available", docs/proving-ground.md).
//
// Like NVIDIA's gpu-kubelet-plugin it:
//   - registers with kubelet (plugins_registry) through k8s.io/dynamic-resource-allocation's
//     kubeletplugin helper, the library NVIDIA's driver uses;
//   - publishes one ResourceSlice per node (driver gpu.nvidia.com, pool = node name), one device
//     per full GPU named gpu-<minor>, with NVIDIA's attribute names and types: type "gpu", uuid,
//     productName, brand, architecture as strings; driverVersion, cudaDriverVersion and
//     cudaComputeCapability as versions normalised to semver (580.159.04 -> 580.159.4, 13.0 ->
//     13.0.0); capacity memory in bytes;
//   - prepares a claim by writing a CDI spec (kind k8s.gpu.nvidia.com/claim, device
//     <claim UID>-<device>) and unprepares it by removing that file.
//
// It reads the GPUs from NVML (go-nvml), or from --devices FILE (a JSON list) on a machine without
// a GPU. With NVML its CDI spec gives a container /dev/nvidia<minor>, /dev/nvidiactl,
// /dev/nvidia-uvm*, the driver's libraries and nvidia-smi (bind mounts), and every container
// gets NVIDIA_VISIBLE_DEVICES (the claim's GPU UUIDs) and GPU_DEVICE_<minor>=gpu-<minor>, so a
// test sees which device it got. Not done (NVIDIA's driver does): MIG devices, sharing
// (time-slicing, MPS), ComputeDomains, VFIO, health reporting, a checkpoint of prepared claims,
// the CDI hooks of the container toolkit (ldcache, symlinks).
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"syscall"

	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"
	"k8s.io/dynamic-resource-allocation/kubeletplugin"
	"k8s.io/dynamic-resource-allocation/resourceslice"
	"k8s.io/klog/v2"
)

// DriverName is the driver NVIDIA's DRA driver registers and its DeviceClasses select.
const DriverName = "gpu.nvidia.com"

type options struct {
	nodeName    string
	kubeconfig  string
	devicesFile string
	registrar   string
	dataDir     string
	cdiDir      string
	devRoot     string
	libDirs     string
	print       bool
}

func main() {
	var o options
	klog.InitFlags(nil)
	flag.StringVar(&o.nodeName, "node-name", os.Getenv("NODE_NAME"), "the Node's name (the pool's)")
	flag.StringVar(&o.kubeconfig, "kubeconfig", "", "kubeconfig (in-cluster config when empty)")
	flag.StringVar(&o.devicesFile, "devices", "", "a JSON list of GPUs instead of NVML (no GPU here)")
	flag.StringVar(&o.registrar, "registrar-dir", "/var/lib/kubelet/plugins_registry", "kubelet's plugin registration folder")
	flag.StringVar(&o.dataDir, "plugin-dir", "/var/lib/kubelet/plugins/"+DriverName, "the folder of the plugin's dra.sock")
	flag.StringVar(&o.cdiDir, "cdi-dir", "/var/run/cdi", "where claims' CDI specs are written (the runtime's CDI spec dir)")
	flag.StringVar(&o.devRoot, "dev-root", "/", "the root whose /dev holds the GPUs' device nodes")
	flag.StringVar(&o.libDirs, "driver-lib-dirs", defaultLibDirs, "comma-separated folders searched for the driver's libraries")
	flag.BoolVar(&o.print, "print-devices", false, "print the ResourceSlice devices as JSON and exit")
	flag.Parse()
	if err := run(o); err != nil {
		fmt.Fprintln(os.Stderr, "dra-gpu-plugin:", err)
		os.Exit(1)
	}
}

func run(o options) error {
	gpus, err := readGPUs(o.devicesFile)
	if err != nil {
		return err
	}
	devices, err := sliceDevices(gpus)
	if err != nil {
		return err
	}
	if o.print {
		return printJSON(devices)
	}
	if o.nodeName == "" {
		return errors.New("--node-name (or NODE_NAME) is required")
	}
	config, err := clientcmd.BuildConfigFromFlags("", o.kubeconfig)
	if err != nil {
		return fmt.Errorf("kubeconfig: %w", err)
	}
	client, err := kubernetes.NewForConfig(config)
	if err != nil {
		return fmt.Errorf("client: %w", err)
	}
	for _, dir := range []string{o.registrar, o.dataDir, o.cdiDir} {
		if err := os.MkdirAll(dir, 0o750); err != nil {
			return err
		}
	}
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	defer stop()
	ctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	plugin := &driver{
		node:   o.nodeName,
		gpus:   byName(gpus),
		cdiDir: o.cdiDir,
		host:   hostEdits(o.devicesFile == "", o.devRoot, o.libDirs),
		cancel: cancel,
	}
	helper, err := kubeletplugin.Start(ctx, plugin,
		kubeletplugin.KubeClient(client),
		kubeletplugin.DriverName(DriverName),
		kubeletplugin.NodeName(o.nodeName),
		kubeletplugin.RegistrarDirectoryPath(o.registrar),
		kubeletplugin.PluginDataDirectoryPath(o.dataDir),
	)
	if err != nil {
		return fmt.Errorf("start: %w", err)
	}
	defer helper.Stop()
	pool := resourceslice.Pool{Slices: []resourceslice.Slice{{Devices: devices}}}
	resources := resourceslice.DriverResources{Pools: map[string]resourceslice.Pool{o.nodeName: pool}}
	if err := helper.PublishResources(ctx, resources); err != nil {
		return fmt.Errorf("publish: %w", err)
	}
	klog.InfoS("Serving", "driver", DriverName, "node", o.nodeName, "devices", len(devices))
	<-ctx.Done()
	if cause := context.Cause(ctx); cause != nil && !errors.Is(cause, context.Canceled) {
		return cause
	}
	return nil
}
