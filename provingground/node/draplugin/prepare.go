package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"

	resourceapi "k8s.io/api/resource/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/dynamic-resource-allocation/kubeletplugin"
	"k8s.io/klog/v2"
)

const (
	cdiVendor = "k8s." + DriverName
	cdiClass  = "claim"
	// CDI 0.5.0 has every field used here; containerd 2.x reads up to 1.1.0.
	cdiVersion     = "0.5.0"
	defaultLibDirs = "/usr/local/nvidia/lib64,/usr/lib/x86_64-linux-gnu,/lib/x86_64-linux-gnu,/usr/lib64,/lib64,/usr/lib,/lib"
	containerLibs  = "/usr/lib/x86_64-linux-gnu"
)

// The driver's user-space files a CUDA or NVML program opens, mounted where the container's
// dynamic loader looks by default (the toolkit's CDI spec also runs an ldcache hook; this does not).
var driverLibs = []string{
	"libcuda.so.1", "libnvidia-ml.so.1", "libnvidia-ptxjitcompiler.so.1",
	"libnvidia-nvvm.so.4", "libcudadebugger.so.1", "libnvidia-gpucomp.so.*",
}

type cdiSpec struct {
	Version string    `json:"cdiVersion"`
	Kind    string    `json:"kind"`
	Devices []cdiDev  `json:"devices"`
	Edits   *cdiEdits `json:"containerEdits,omitempty"`
}

type cdiDev struct {
	Name  string   `json:"name"`
	Edits cdiEdits `json:"containerEdits"`
}

type cdiEdits struct {
	Env         []string   `json:"env,omitempty"`
	DeviceNodes []cdiNode  `json:"deviceNodes,omitempty"`
	Mounts      []cdiMount `json:"mounts,omitempty"`
}

type cdiNode struct {
	Path string `json:"path"`
}

type cdiMount struct {
	HostPath      string   `json:"hostPath"`
	ContainerPath string   `json:"containerPath"`
	Options       []string `json:"options"`
}

// hostGPU: what every container with one of this node's GPUs gets besides its own device node.
type hostGPU struct {
	real    bool
	devRoot string
	edits   cdiEdits
}

func hostEdits(real bool, devRoot, libDirs string) hostGPU {
	h := hostGPU{real: real, devRoot: devRoot}
	if !real {
		return h
	}
	for _, node := range []string{"/dev/nvidiactl", "/dev/nvidia-uvm", "/dev/nvidia-uvm-tools"} {
		if _, err := os.Stat(filepath.Join(devRoot, node)); err == nil {
			h.edits.DeviceNodes = append(h.edits.DeviceNodes, cdiNode{Path: node})
		}
	}
	ro := []string{"ro", "nosuid", "nodev", "rbind", "rprivate"}
	cache := ldconfigCache()
	for _, pattern := range driverLibs {
		for _, m := range findLibs(pattern, cache, strings.Split(libDirs, ",")) {
			real, err := filepath.EvalSymlinks(m)
			if err != nil {
				continue
			}
			target := filepath.Join(containerLibs, filepath.Base(m))
			h.edits.Mounts = append(h.edits.Mounts, cdiMount{real, target, ro})
		}
	}
	// The binary itself: a /usr/bin/nvidia-smi may be a script that execs another path (the GPU
	// machine's runs /usr/local/nvidia/bin/nvidia-smi, absent in a container).
	for _, dir := range []string{"/usr/local/nvidia/bin", "/usr/bin", "/usr/local/bin"} {
		if p := filepath.Join(dir, "nvidia-smi"); isELF(p) {
			h.edits.Mounts = append(h.edits.Mounts, cdiMount{p, "/usr/bin/nvidia-smi", ro})
			break
		}
	}
	klog.InfoS("Driver files for containers", "deviceNodes", h.edits.DeviceNodes, "mounts", h.edits.Mounts)
	return h
}

// ldconfigCache: the host's registered libraries, name -> path (x86-64 only), from ldconfig -p.
func ldconfigCache() map[string]string {
	out, err := exec.Command("ldconfig", "-p").Output()
	libs := map[string]string{}
	if err != nil {
		return libs
	}
	for _, line := range strings.Split(string(out), "\n") {
		name, rest, ok := strings.Cut(strings.TrimSpace(line), " (")
		arch, path, found := strings.Cut(rest, ") => ")
		if ok && found && strings.Contains(arch, "x86-64") {
			if _, seen := libs[name]; !seen {
				libs[name] = path
			}
		}
	}
	return libs
}

// findLibs: the host files for one name pattern, from ldconfig's cache, else the first folder
// that has any.
func findLibs(pattern string, cache map[string]string, dirs []string) []string {
	var found []string
	for name, path := range cache {
		if ok, _ := filepath.Match(pattern, name); ok {
			found = append(found, path)
		}
	}
	if len(found) > 0 {
		sort.Strings(found)
		return found
	}
	for _, dir := range dirs {
		if matches, _ := filepath.Glob(filepath.Join(dir, pattern)); len(matches) > 0 {
			return matches
		}
	}
	return nil
}

func isELF(p string) bool {
	f, err := os.Open(p)
	if err != nil {
		return false
	}
	defer f.Close()
	magic := make([]byte, 4)
	_, err = io.ReadFull(f, magic)
	return err == nil && string(magic) == "\x7fELF"
}

type driver struct {
	node   string
	gpus   map[string]gpu
	cdiDir string
	host   hostGPU
	cancel context.CancelCauseFunc
}

var _ kubeletplugin.DRAPlugin = (*driver)(nil)

func (d *driver) specPath(uid types.UID) string {
	return filepath.Join(d.cdiDir, fmt.Sprintf("%s-%s_%s.json", cdiVendor, cdiClass, uid))
}

// PrepareResourceClaims writes one CDI spec per claim and returns its devices' CDI IDs.
func (d *driver) PrepareResourceClaims(ctx context.Context, claims []*resourceapi.ResourceClaim) (map[types.UID]kubeletplugin.PrepareResult, error) {
	result := make(map[types.UID]kubeletplugin.PrepareResult, len(claims))
	for _, claim := range claims {
		devices, err := d.prepare(claim)
		result[claim.UID] = kubeletplugin.PrepareResult{Devices: devices, Err: err}
		klog.FromContext(ctx).Info("Prepared", "claim", klog.KObj(claim), "devices", devices, "err", err)
	}
	return result, nil
}

func (d *driver) prepare(claim *resourceapi.ResourceClaim) ([]kubeletplugin.Device, error) {
	if claim.Status.Allocation == nil {
		return nil, fmt.Errorf("claim %s/%s is not allocated", claim.Namespace, claim.Name)
	}
	spec := cdiSpec{Version: cdiVersion, Kind: cdiVendor + "/" + cdiClass}
	var devices []kubeletplugin.Device
	var uuids []string
	for _, r := range claim.Status.Allocation.Devices.Results {
		if r.Driver != DriverName {
			continue
		}
		g, ok := d.gpus[r.Device]
		if !ok || r.Pool != d.node {
			return nil, fmt.Errorf("claim %s/%s: device %s/%s is not on node %s", claim.Namespace, claim.Name, r.Pool, r.Device, d.node)
		}
		name := fmt.Sprintf("%s-%s", claim.UID, g.Name())
		edits := cdiEdits{Env: []string{
			fmt.Sprintf("GPU_DEVICE_%d=%s", g.Minor, g.Name()),
			fmt.Sprintf("GPU_DEVICE_%d_UUID=%s", g.Minor, g.UUID),
		}}
		if d.host.real {
			edits.DeviceNodes = []cdiNode{{Path: fmt.Sprintf("/dev/nvidia%d", g.Minor)}}
		}
		spec.Devices = append(spec.Devices, cdiDev{Name: name, Edits: edits})
		uuids = append(uuids, g.UUID)
		devices = append(devices, kubeletplugin.Device{
			Requests:     []string{r.Request},
			PoolName:     r.Pool,
			DeviceName:   r.Device,
			CDIDeviceIDs: []string{cdiVendor + "/" + cdiClass + "=" + name},
		})
	}
	if len(devices) == 0 {
		return nil, nil
	}
	sort.Strings(uuids)
	common := d.host.edits
	common.Env = []string{"NVIDIA_VISIBLE_DEVICES=" + strings.Join(uuids, ",")}
	spec.Edits = &common
	return devices, writeAtomic(d.specPath(claim.UID), spec)
}

func writeAtomic(path string, v any) error {
	data, err := json.MarshalIndent(v, "", " ")
	if err != nil {
		return err
	}
	tmp := path + ".tmp"
	if err := os.WriteFile(tmp, data, 0o644); err != nil { //nolint:gosec // the runtime reads it
		return err
	}
	return os.Rename(tmp, path)
}

// UnprepareResourceClaims removes the claims' CDI specs; a claim never prepared is no error.
func (d *driver) UnprepareResourceClaims(ctx context.Context, claims []kubeletplugin.NamespacedObject) (map[types.UID]error, error) {
	result := make(map[types.UID]error, len(claims))
	for _, claim := range claims {
		err := os.Remove(d.specPath(claim.UID))
		if errors.Is(err, os.ErrNotExist) {
			err = nil
		}
		result[claim.UID] = err
		klog.FromContext(ctx).Info("Unprepared", "claim", claim.String(), "err", err)
	}
	return result, nil
}

// HandleError logs background errors (publishing slices); a fatal one stops the plugin.
func (d *driver) HandleError(ctx context.Context, err error, msg string) {
	klog.FromContext(ctx).Error(err, msg)
	if !errors.Is(err, kubeletplugin.ErrRecoverable) {
		d.cancel(fmt.Errorf("%s: %w", msg, err))
	}
}
