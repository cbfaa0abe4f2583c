"""The node's configuration files: containerd, CNI, kubelet, kube-proxy, CoreDNS, kubeconfigs.

Pure functions from a ``NodeSpec`` and the paths of one run to file contents (standard library
only). Every path is under the node's root, so a node leaves nothing in ``/etc`` or ``/var``.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

__all__ = [
    "CLUSTER_DOMAIN",
    "PAUSE_IMAGE",
    "NodeSpec",
    "cni_conflist",
    "containerd_config",
    "corefile",
    "kube_proxy_config",
    "kubeconfig",
    "kubelet_config",
]

CLUSTER_DOMAIN = "cluster.local"
PAUSE_IMAGE = "localhost/node/pause:local"


@dataclass(frozen=True)
class NodeSpec:
    """What the node is: its name, labels and taints, networks, and whether it runs Services.

    ``services`` runs kube-proxy and CoreDNS (the cluster DNS at ``dns_ip``): it needs the
    iptables tools. ``cgroup_v1`` sets kubelet's ``failCgroupV1: false``; None detects it.
    ``taints`` are registered by kubelet (the GPU node's ``nvidia.com/gpu``).
    """

    name: str = "real-node"
    labels: dict[str, str] = field(default_factory=dict)
    taints: list[dict[str, str]] = field(default_factory=list)
    pod_subnet: str = "10.99.0.0/24"
    bridge: str = "node0"
    service_cidr: str = "10.0.0.0/16"
    dns_ip: str = "10.0.0.10"
    services: bool = True
    cgroup_v1: bool | None = None
    snapshotter: str = "overlayfs"
    max_pods: int = 30
    # kubelet's --root-dir; "" is <root>/kubelet. The NVIDIA device plugin registers under
    # /var/lib/kubelet/device-plugins/, so the GPU node keeps kubelet's default there.
    kubelet_root: str = ""


def containerd_config(
    root: Path, bin_dir: Path, cni_conf: Path, spec: NodeSpec, *, restrict_oom: bool
) -> str:
    """Containerd's ``version = 3`` configuration: its own root, state and socket; CRI, CNI."""
    rt = "plugins.'io.containerd.cri.v1.runtime'"
    sock = root / "run/containerd/containerd.sock"
    return f"""version = 3
root = "{root / "containerd"}"
state = "{root / "run/containerd"}"
[grpc]
  address = "{sock}"
[ttrpc]
  address = "{sock}.ttrpc"
[plugins.'io.containerd.cri.v1.images']
  snapshotter = "{spec.snapshotter}"
  [plugins.'io.containerd.cri.v1.images'.pinned_images]
    sandbox = "{PAUSE_IMAGE}"
[{rt}]
  restrict_oom_score_adj = {str(restrict_oom).lower()}
  netns_mounts_under_state_dir = true
  cdi_spec_dirs = ["/etc/cdi", "/var/run/cdi", "{root / "cdi"}"]
  [{rt}.containerd]
    default_runtime_name = "runc"
    [{rt}.containerd.runtimes.runc]
      runtime_type = "io.containerd.runc.v2"
      [{rt}.containerd.runtimes.runc.options]
        BinaryName = "{bin_dir / "runc"}"
        SystemdCgroup = false
  [{rt}.cni]
    bin_dirs = ["{bin_dir}"]
    conf_dir = "{cni_conf}"
"""


def cni_conflist(root: Path, spec: NodeSpec) -> dict[str, Any]:
    """The bridge network: ``spec.bridge`` as the pods' gateway, host-local addresses."""
    return {
        "cniVersion": "1.0.0",
        "name": "node",
        "plugins": [
            {
                "type": "bridge",
                "bridge": spec.bridge,
                "isGateway": True,
                # Pods reach the host's own addresses without it; no rules left behind.
                "ipMasq": False,
                "hairpinMode": True,
                "ipam": {
                    "type": "host-local",
                    "ranges": [[{"subnet": spec.pod_subnet}]],
                    "routes": [{"dst": "0.0.0.0/0"}],
                    "dataDir": str(root / "cni-ipam"),
                },
            },
            {"type": "loopback"},
        ],
    }


def kubelet_config(root: Path, ca: Path, spec: NodeSpec, *, cgroup_v1: bool) -> dict[str, Any]:
    """KubeletConfiguration: cgroupfs, containerd's socket, cluster DNS when it runs."""
    config: dict[str, Any] = {
        "apiVersion": "kubelet.config.k8s.io/v1beta1",
        "kind": "KubeletConfiguration",
        "authentication": {
            "anonymous": {"enabled": False},
            "webhook": {"enabled": True},
            "x509": {"clientCAFile": str(ca)},
        },
        "authorization": {"mode": "Webhook"},
        "cgroupDriver": "cgroupfs",
        "containerRuntimeEndpoint": f"unix://{root / 'run/containerd/containerd.sock'}",
        "failSwapOn": False,
        "resolvConf": "/etc/resolv.conf",
        "readOnlyPort": 0,
        "port": 10250,
        "healthzBindAddress": "127.0.0.1",
        "healthzPort": 10248,
        "podLogsDir": str(root / "pod-logs"),
        "serializeImagePulls": False,
        "evictionHard": {
            "memory.available": "100Mi",
            "nodefs.available": "1%",
            "imagefs.available": "1%",
            "nodefs.inodesFree": "1%",
        },
        "imageGCHighThresholdPercent": 100,
        "imageGCLowThresholdPercent": 99,
        "registerWithTaints": spec.taints,
        # kubelet's own KUBE-FIREWALL/KUBE-KUBELET-CANARY chains: not needed, left behind.
        "makeIPTablesUtilChains": False,
        "maxPods": spec.max_pods,
    }
    if spec.services:
        config["clusterDNS"] = [spec.dns_ip]
        config["clusterDomain"] = CLUSTER_DOMAIN
    if cgroup_v1:
        config["failCgroupV1"] = False  # KEP-5573: kubelet 1.35+ refuses cgroup v1 otherwise
    return config


def kube_proxy_config(
    kubeconfig_path: Path, spec: NodeSpec, *, healthz_port: int, metrics_port: int
) -> dict[str, Any]:
    """KubeProxyConfiguration: iptables mode, every Service connection masqueraded.

    ``masqueradeAll``: a pod reaching a Service whose endpoint is a pod on the same bridge
    gets the answer back through the host, so without ``br_netfilter`` it still works. The
    conntrack settings are 0, so kube-proxy leaves the host's conntrack sysctls alone.
    """
    return {
        "apiVersion": "kubeproxy.config.k8s.io/v1alpha1",
        "kind": "KubeProxyConfiguration",
        "clientConnection": {"kubeconfig": str(kubeconfig_path)},
        "hostnameOverride": spec.name,
        "mode": "iptables",
        "clusterCIDR": spec.pod_subnet,
        "iptables": {"masqueradeAll": True},
        "conntrack": {
            "maxPerCore": 0,
            "min": 0,
            "tcpEstablishedTimeout": "0s",
            "tcpCloseWaitTimeout": "0s",
        },
        "healthzBindAddress": f"127.0.0.1:{healthz_port}",
        "metricsBindAddress": f"127.0.0.1:{metrics_port}",
    }


def corefile(
    address: str, port: int, kubeconfig_path: Path, *, health_port: int, ready_port: int
) -> str:
    """CoreDNS answering ``cluster.local`` from the API server and forwarding the rest."""
    return f""".:{port} {{
    bind {address}
    errors
    health 127.0.0.1:{health_port}
    ready 127.0.0.1:{ready_port}
    kubernetes {CLUSTER_DOMAIN} in-addr.arpa ip6.arpa {{
        kubeconfig {kubeconfig_path}
        pods insecure
        fallthrough in-addr.arpa ip6.arpa
    }}
    forward . /etc/resolv.conf
    cache 30
    loadbalance
}}
"""


def kubeconfig(server: str, ca: Path, cert: Path, key: Path) -> str:
    """A kubeconfig (JSON, which is YAML) for one client certificate."""
    doc = {
        "apiVersion": "v1",
        "kind": "Config",
        "clusters": [
            {"name": "node", "cluster": {"server": server, "certificate-authority": str(ca)}}
        ],
        "users": [
            {"name": "node", "user": {"client-certificate": str(cert), "client-key": str(key)}}
        ],
        "contexts": [{"name": "node", "context": {"cluster": "node", "user": "node"}}],
        "current-context": "node",
    }
    return json.dumps(doc, indent=1)
