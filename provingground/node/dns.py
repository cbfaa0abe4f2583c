"""Services on the real node: kube-proxy, and CoreDNS behind the ``kube-dns`` Service.

CoreDNS runs as a host process on the node's address (a free port); the ``kube-dns`` Service
(ClusterIP ``spec.dns_ip``, port 53) has no selector, and an EndpointSlice points it at that
address, so kube-proxy sends pods' DNS queries there, as it would to CoreDNS pods.
"""

from __future__ import annotations

import functools
import json
import random
import socket
import struct
from typing import TYPE_CHECKING, Any

from . import configs
from .host import answers_ok, free_port

if TYPE_CHECKING:
    from .harness import RealNode

__all__ = ["DNS_MANAGER", "kube_dns_objects", "start_coredns", "start_kube_proxy"]

DNS_MANAGER = "dask-gpu-parity.test-node"


def start_kube_proxy(node: RealNode) -> None:
    """kube-proxy (``system:kube-proxy``) in iptables mode; wait until it has synced."""
    assert node.proxy_cert is not None  # checked by RealNode._services
    kubeconfig = node._kubeconfig("kube-proxy", node.proxy_cert)
    healthz = free_port()
    cfg = node.root / "etc/kube-proxy.json"
    config = configs.kube_proxy_config(
        kubeconfig, node.spec, healthz_port=healthz, metrics_port=free_port()
    )
    cfg.write_text(json.dumps(config, indent=1))
    proc = node._spawn("kube-proxy", [str(node.bin / "kube-proxy"), f"--config={cfg}", "--v=2"])
    url = f"http://127.0.0.1:{healthz}/healthz"
    node._wait(proc, functools.partial(answers_ok, url), f"healthy ({url})")


def kube_dns_objects(dns_ip: str, address: str, port: int) -> list[dict[str, Any]]:
    """The ``kube-dns`` Service (no selector) and its EndpointSlice to ``address:port``."""
    ports = [("dns", "UDP"), ("dns-tcp", "TCP")]
    meta = {"namespace": "kube-system", "labels": {"k8s-app": "kube-dns"}}
    service: dict[str, Any] = {
        "apiVersion": "v1",
        "kind": "Service",
        "metadata": {"name": "kube-dns", **meta},
        "spec": {
            "clusterIP": dns_ip,
            "ports": [{"name": n, "port": 53, "protocol": p, "targetPort": port} for n, p in ports],
        },
    }
    labels = {
        "kubernetes.io/service-name": "kube-dns",
        "endpointslice.kubernetes.io/managed-by": DNS_MANAGER,
    }
    slice_: dict[str, Any] = {
        "apiVersion": "discovery.k8s.io/v1",
        "kind": "EndpointSlice",
        "metadata": {"name": "kube-dns-node", "namespace": "kube-system", "labels": labels},
        "addressType": "IPv4",
        "endpoints": [{"addresses": [address], "conditions": {"ready": True}}],
        "ports": [{"name": n, "port": port, "protocol": p} for n, p in ports],
    }
    return [service, slice_]


def start_coredns(node: RealNode) -> None:
    """CoreDNS on the node's address, the ``kube-dns`` objects; wait until it is ready."""
    port, health, ready = free_port(node.address), free_port(), free_port()
    corefile = node.root / "etc/Corefile"
    corefile.write_text(
        configs.corefile(
            node.address, port, node.admin_kubeconfig, health_port=health, ready_port=ready
        )
    )
    proc = node._spawn("coredns", [str(node.bin / "coredns"), "-conf", str(corefile)])
    docs = {
        "apiVersion": "v1",
        "kind": "List",
        "items": kube_dns_objects(node.spec.dns_ip, node.address, port),
    }
    path = node.root / "etc/kube-dns.json"
    path.write_text(json.dumps(docs, indent=1))
    node.kubectl("apply", "--server-side", "--force-conflicts", "-f", str(path))
    url = f"http://127.0.0.1:{ready}/ready"
    node._wait(proc, functools.partial(answers_ok, url), f"ready ({url})")
    # What pods do: ask the kube-dns Service's address (kube-proxy's rules, then CoreDNS).
    name = f"kubernetes.default.svc.{configs.CLUSTER_DOMAIN}"
    node._wait(
        proc,
        functools.partial(resolves, node.spec.dns_ip, name),
        f"answering {name} at {node.spec.dns_ip}:53",
    )


def resolves(server: str, name: str) -> bool:
    """Whether the DNS server at ``server:53`` answers an A record for ``name`` (one UDP try)."""
    ident = random.randrange(1 << 16)  # a query id, not a secret
    question = b"".join(bytes([len(p)]) + p.encode() for p in name.split(".")) + b"\0"
    query = struct.pack(">HHHHHH", ident, 0x0100, 1, 0, 0, 0) + question + struct.pack(">HH", 1, 1)
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as sock:
        sock.settimeout(1)
        sock.sendto(query, (server, 53))
        answer = sock.recv(512)
    got_id, flags, _, count = struct.unpack(">HHHH", answer[:8])
    return bool(got_id == ident and flags & 0xF == 0 and count > 0)
