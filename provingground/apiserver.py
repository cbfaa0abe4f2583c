"""kube-apiserver's command line on the proving ground, in one place for its start and restarts."""

from __future__ import annotations

from pathlib import Path

__all__ = ["ADMISSION_PLUGINS", "SERVICE_CIDR", "apiserver_args"]

SERVICE_CIDR = "10.0.0.0/16"
# Added to the API server's default plugin set (which already has most of these): the ones
# this project's tests depend on, named so a reader does not have to know the defaults.
ADMISSION_PLUGINS = (
    "NamespaceLifecycle,ServiceAccount,PodSecurity,TaintNodesByCondition,Priority,"
    "MutatingAdmissionWebhook,ValidatingAdmissionWebhook,ValidatingAdmissionPolicy,"
    "ResourceQuota,NodeRestriction"
)


def apiserver_args(etcd_port: int, port: int, pki: Path) -> list[str]:
    """The flags of kube-apiserver on 127.0.0.1:``port``, storing in etcd on ``etcd_port``."""
    return [
        f"--etcd-servers=http://127.0.0.1:{etcd_port}",
        "--bind-address=127.0.0.1",
        "--advertise-address=127.0.0.1",
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
        f"--enable-admission-plugins={ADMISSION_PLUGINS}",
        "--allow-privileged=true",
        "--endpoint-reconciler-type=none",
        "--enable-priority-and-fairness=false",
        "--max-requests-inflight=0",
        "--max-mutating-requests-inflight=0",
        "--profiling=false",
        # Aggregation layer / delegated authn of the other components.
        f"--requestheader-client-ca-file={pki / 'ca.crt'}",
        "--requestheader-allowed-names=front-proxy-client",
        "--requestheader-username-headers=X-Remote-User",
        "--requestheader-group-headers=X-Remote-Group",
        "--requestheader-extra-headers-prefix=X-Remote-Extra-",
        f"--proxy-client-cert-file={pki / 'front-proxy-client.crt'}",
        f"--proxy-client-key-file={pki / 'front-proxy-client.key'}",
    ]
