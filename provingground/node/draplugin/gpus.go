package main

import (
	"encoding/json"
	"fmt"
	"os"
	"sort"

	"github.com/Masterminds/semver/v3"
	nvdev "github.com/NVIDIA/go-nvlib/pkg/nvlib/device"
	"github.com/NVIDIA/go-nvml/pkg/nvml"
	resourceapi "k8s.io/api/resource/v1"
	"k8s.io/apimachinery/pkg/api/resource"
)

// gpu is one full GPU: what NVML says of it, also the --devices file's entries.
type gpu struct {
	Minor                 int    `json:"minor"`
	UUID                  string `json:"uuid"`
	ProductName           string `json:"productName"`
	Brand                 string `json:"brand"`
	Architecture          string `json:"architecture"`
	CUDAComputeCapability string `json:"cudaComputeCapability"`
	DriverVersion         string `json:"driverVersion"`
	CUDADriverVersion     string `json:"cudaDriverVersion"`
	MemoryBytes           int64  `json:"memoryBytes"`
}

// Name is the device's name in the ResourceSlice, as NVIDIA's driver names a full GPU.
func (g gpu) Name() string { return fmt.Sprintf("gpu-%d", g.Minor) }

func readGPUs(file string) ([]gpu, error) {
	if file == "" {
		return nvmlGPUs()
	}
	data, err := os.ReadFile(file)
	if err != nil {
		return nil, err
	}
	var gpus []gpu
	if err := json.Unmarshal(data, &gpus); err != nil {
		return nil, fmt.Errorf("%s: not a JSON list of GPUs: %w", file, err)
	}
	for i, g := range gpus {
		if g.UUID == "" {
			return nil, fmt.Errorf("%s: GPU %d has no uuid", file, i)
		}
	}
	return gpus, nil
}

func nvmlGPUs() ([]gpu, error) {
	lib := nvml.New()
	if ret := lib.Init(); ret != nvml.SUCCESS {
		return nil, fmt.Errorf("NVML init: %v (no GPU here? use --devices FILE)", ret)
	}
	defer lib.Shutdown()
	driver, ret := lib.SystemGetDriverVersion()
	if ret != nvml.SUCCESS {
		return nil, fmt.Errorf("NVML driver version: %v", ret)
	}
	cuda, ret := lib.SystemGetCudaDriverVersion()
	if ret != nvml.SUCCESS {
		return nil, fmt.Errorf("NVML CUDA driver version: %v", ret)
	}
	devices, err := nvdev.New(lib).GetDevices()
	if err != nil {
		return nil, err
	}
	gpus := make([]gpu, 0, len(devices))
	for i, d := range devices {
		g := gpu{DriverVersion: driver, CUDADriverVersion: fmt.Sprintf("%d.%d", cuda/1000, (cuda%1000)/10)}
		var rets [4]nvml.Return
		g.Minor, rets[0] = d.GetMinorNumber()
		g.UUID, rets[1] = d.GetUUID()
		g.ProductName, rets[2] = d.GetName()
		mem, ret := d.GetMemoryInfo()
		rets[3] = ret
		for _, r := range rets {
			if r != nvml.SUCCESS {
				return nil, fmt.Errorf("NVML device %d: %v", i, r)
			}
		}
		g.MemoryBytes = int64(mem.Total) //nolint:gosec // a GPU's memory fits
		if g.Architecture, err = d.GetArchitectureAsString(); err != nil {
			return nil, err
		}
		if g.Brand, err = d.GetBrandAsString(); err != nil {
			return nil, err
		}
		if g.CUDAComputeCapability, err = d.GetCudaComputeCapabilityAsString(); err != nil {
			return nil, err
		}
		gpus = append(gpus, g)
	}
	return gpus, nil
}

// semverString normalises a version as NVIDIA's driver does (semver.MustParse(v).String()).
func semverString(what, v string) (*string, error) {
	parsed, err := semver.NewVersion(v)
	if err != nil {
		return nil, fmt.Errorf("%s %q is not a version: %w", what, v, err)
	}
	s := parsed.String()
	return &s, nil
}

func sliceDevices(gpus []gpu) ([]resourceapi.Device, error) {
	devices := make([]resourceapi.Device, 0, len(gpus))
	for _, g := range gpus {
		attrs := map[resourceapi.QualifiedName]resourceapi.DeviceAttribute{}
		for name, value := range map[string]string{
			"type": "gpu", "uuid": g.UUID, "productName": g.ProductName,
			"brand": g.Brand, "architecture": g.Architecture,
		} {
			attrs[resourceapi.QualifiedName(name)] = resourceapi.DeviceAttribute{StringValue: &value}
		}
		for name, value := range map[string]string{
			"cudaComputeCapability": g.CUDAComputeCapability,
			"driverVersion":         g.DriverVersion, "cudaDriverVersion": g.CUDADriverVersion,
		} {
			v, err := semverString(name, value)
			if err != nil {
				return nil, fmt.Errorf("GPU %s: %w", g.UUID, err)
			}
			attrs[resourceapi.QualifiedName(name)] = resourceapi.DeviceAttribute{VersionValue: v}
		}
		devices = append(devices, resourceapi.Device{
			Name:       g.Name(),
			Attributes: attrs,
			Capacity: map[resourceapi.QualifiedName]resourceapi.DeviceCapacity{
				"memory": {Value: *resource.NewQuantity(g.MemoryBytes, resource.BinarySI)},
			},
		})
	}
	sort.Slice(devices, func(i, j int) bool { return devices[i].Name < devices[j].Name })
	return devices, nil
}

func byName(gpus []gpu) map[string]gpu {
	m := make(map[string]gpu, len(gpus))
	for _, g := range gpus {
		m[g.Name()] = g
	}
	return m
}

func printJSON(v any) error {
	enc := json.NewEncoder(os.Stdout)
	enc.SetIndent("", " ")
	return enc.Encode(v)
}
