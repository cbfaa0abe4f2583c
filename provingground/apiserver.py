"""kube-apiserver's command line on the proving ground, in one place for its start and restarts."""

from __future__ import annotations

from pathlib import Path

__all__ = ["ADMISSION_PLUGINS", "FEATURE_GATES", "SERVICE_CIDR", "apiserver_args"]

SERVICE_CIDR = "10.0.0.0/16"
# Set on kube-apiserver, kube-scheduler and kube-controller-manager alike. DRAExtendedResource
# (KEP-5004: nvidia.com/gpu served by a DeviceClass's extendedResourceName) is beta and on by
# default in v1.36, named so that the proving ground keeps it if a release turns it off; the rest
# of what DRA on GPUs needs is GA there (DynamicResourceAllocation, DRAPrioritizedList,
# DRAAdminAccess), and a GA gate cannot be turned off. Stages measured: docs/proving-ground.md.
FEATURE_GATES = "DRAExtendedResource=true"
# Added to the API server's default plugin set (which already has most of these): the ones
# this project's tests depend on, named so a reader does not have to know the defaults.
ADMISSION_PLUGINS = (
    "NamespaceLifecycle,ServiceAccount,PodSecurity,TaintNodesByCondition,Priority,"
    "MutatingAdmissionWebhook,ValidatingAdmissionWebhook,ValidatingAdmissionPolicy,"
    "ResourceQuota,NodeRestriction"
)


def apiserver_args(
    etcd_port: int, port: int, pki: Path, advertise_address: str | None = None
) -> list[str]:
    """The flags of kube-apiserver on ``port``, storing in etcd on ``etcd_port``.

    Without ``advertise_address`` it listens on 127.0.0.1 only and keeps no endpoints for the
    ``kubernetes`` Service. With one (an address pods can reach: the real node's), it listens
    on every address and the ``kubernetes`` Service's endpoints are that address and ``port``,
    so pods reach it through the Service as on a real cluster.
    """
    if advertise_address:
        listen = [
            "--bind-address=0.0.0.0",
            f"--advertise-address={advertise_address}",
            "--endpoint-reconciler-type=lease",
        ]
    else:
        listen = [
            "--bind-address=127.0.0.1",
            "--advertise-address=127.0.0.1",
            "--endpoint-reconciler-type=none",
        ]
    return [
        f"--etcd-servers=http://127.0.0.1:{etcd_port}",
        *listen,
        f"--secure-port={port}",
        f"--cert-dir={pki}",
        f"--tls-cert-file={pki / 'apiserver.crt'}",
        f"--tls-private-key-file={pki / 'apiserver.key'}",
        f"--client-ca-file={pki / 'ca.crt'}",
        "--service-account-issuer=https://kubernetes.default.svc.cluster.local",
        f"--service-account-key-file={pki / 'sa.pub'}",
        f"--service-account-signing-key-file={pki / 'sa.key'}",
        f"--service-cluster-ip-range={SERVICE_CIDR}",
        "--authorization-mode=Node,RBAC",
        f"--feature-gates={FEATURE_GATES}",
        f"--enable-admission-plugins={ADMISSION_PLUGINS}",
        "--allow-privileged=true",
        "--enable-priority-and-fairness=false",
        "--max-requests-inflight=0",
        "--max-mutating-requests-inflight=0",
        "--profiling=false",
        # kubectl logs/exec on a real node: the API server calls kubelet as the admin.
        f"--kubelet-client-certificate={pki / 'admin.crt'}",
        f"--kubelet-client-key={pki / 'admin.key'}",
        "--kubelet-preferred-address-types=InternalIP,Hostname",
        # Aggregation layer / delegated authn of the other components.
        f"--requestheader-client-ca-file={pki / 'ca.crt'}",
        "--requestheader-allowed-names=front-proxy-client",
        "--requestheader-username-headers=X-Remote-User",
        "--requestheader-group-headers=X-Remote-Group",
        "--requestheader-extra-headers-prefix=X-Remote-Extra-",
        f"--proxy-client-cert-file={pki / 'front-proxy-client.crt'}",
        f"--proxy-client-key-file={pki / 'front-proxy-client.key'}",
    ]
