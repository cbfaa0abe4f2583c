//go:build tools

// Package tools pins the NVIDIA device plugin's main package into this module's graph. The plugin
// is built from here (build.sh) rather than with `go install pkg@version`, which also asks the
// module proxy for the module's version list (for deprecation notices), and that list is not
// served for github.com/NVIDIA/k8s-device-plugin (403), while its versions are.
package tools

import _ "github.com/NVIDIA/k8s-device-plugin/cmd/nvidia-device-plugin"
