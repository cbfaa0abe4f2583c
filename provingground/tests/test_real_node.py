"""The real node in the proving ground: joined, running containers, Services, DNS, clean stop.

Pods run ``localhost/node/busybox:test`` (Debian's busybox-static, ``provingground/node/
testimage.py``) on the node selected by ``REAL_NODE_SELECTOR``. Every wait is for a promise
(Ready, Succeeded, an answer); its deadline only turns a broken node into a failure.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from provingground.node import RealNode, cleanup, find_node_binaries, testimage
from provingground.node.join import REAL_NODE_LABEL
from provingground.pytest_plugin import E2ECluster
from provingground.tests.nodepods import apply, eventually, finished_log, pod

pytestmark = pytest.mark.e2e
KUBECTL_IMAGE = "localhost/node/busybox-kubectl:test"


def test_real_node_joins_ready_labelled_and_without_gpus(
    cluster: E2ECluster, real_node: RealNode
) -> None:
    node = json.loads(cluster.kubectl("get", "node", real_node.name, "-o", "json").stdout)
    conditions = {c["type"]: c["status"] for c in node["status"]["conditions"]}
    assert conditions["Ready"] == "True"
    assert node["metadata"]["labels"][REAL_NODE_LABEL] == "true"
    assert "nvidia.com/gpu" not in node["status"]["capacity"]
    assert node["status"]["nodeInfo"]["containerRuntimeVersion"].startswith("containerd://")


def test_pod_on_the_real_node_runs_a_real_container(
    cluster: E2ECluster, real_node: RealNode, namespace: str
) -> None:
    apply(cluster, namespace, pod("uname", "echo kernel $(cat /proc/sys/kernel/osrelease)"))
    log = finished_log(cluster, namespace, "uname")
    with open("/proc/sys/kernel/osrelease") as f:
        assert log.strip() == f"kernel {f.read().strip()}"
    got = json.loads(cluster.kubectl("get", "pod", "-n", namespace, "uname", "-o", "json").stdout)
    assert got["spec"]["nodeName"] == real_node.name
    assert got["status"]["containerStatuses"][0]["containerID"].startswith("containerd://")


def test_pod_reaches_another_pod_through_a_service_by_its_dns_name(
    cluster: E2ECluster, real_node: RealNode, namespace: str
) -> None:
    server = pod("web", "httpd -f -p 8080 -h /www")
    server["spec"]["restartPolicy"] = "Always"
    service = {
        "apiVersion": "v1",
        "kind": "Service",
        "metadata": {"name": "web"},
        "spec": {"selector": {"app": "web"}, "ports": [{"port": 80, "targetPort": 8080}]},
    }
    url = f"http://web.{namespace}.svc.cluster.local/index.html"
    # Retried inside the pod, each try bounded: the Service's endpoint appears once the server
    # pod is Ready. Each failed try says why on stderr (an unknown name is DNS; a refused or
    # timed-out connection is kube-proxy or the endpoint), and the pod fails when none answered.
    # ``timeout`` bounds a try: this busybox's own ``wget -T`` crashes (segfault, 1.35.0).
    client = pod(
        "client",
        f"for i in $(seq 90); do timeout 10 wget -q -O - {url} && exit 0; sleep 1; done; exit 1",
    )
    apply(cluster, namespace, server, service, client)
    # A try that timed out leaves the shell's "Terminated" above the answer: the last line counts.
    lines = finished_log(cluster, namespace, "client").strip().splitlines()
    assert lines[-1] == "hello from the real node"


def test_pod_reaches_the_api_server_through_the_kubernetes_service_with_its_token(
    cluster: E2ECluster, real_node: RealNode, namespace: str, tmp_path: Path
) -> None:
    # kubectl (the node's own build) verifies the API server against the service account's
    # CA and sends its token: what every in-cluster client does. busybox's wget cannot: its
    # TLS client shares no cipher suite with the API server's Go TLS.
    deb = find_node_binaries().test_image.parent / "busybox-static.deb"
    archive = tmp_path / "kubectl.tar"
    testimage.build(deb, archive, name=KUBECTL_IMAGE, extra={"bin/kubectl": real_node.bin / "k8s"})
    real_node.import_images([archive])
    sa = "/var/run/secrets/kubernetes.io/serviceaccount"
    kubectl = (
        f"kubectl --server=https://kubernetes.default.svc --certificate-authority={sa}/ca.crt "
        f'--token="$(cat {sa}/token)" get --raw /api'
    )
    command = f"for i in $(seq 30); do {kubectl} && exit 0; sleep 1; done; exit 1"
    spec = pod("api", command)
    spec["spec"]["containers"][0]["image"] = KUBECTL_IMAGE
    apply(cluster, namespace, spec)
    answer = json.loads(finished_log(cluster, namespace, "api"))
    assert answer["kind"] == "APIVersions"
    assert answer["serverAddressByClientCIDRs"][0]["serverAddress"].startswith(
        real_node.address + ":"
    )


def test_stopping_leaves_nothing_behind_and_the_node_starts_again(
    cluster: E2ECluster, real_node: RealNode, namespace: str
) -> None:
    apply(cluster, namespace, pod("sleeper", "sleep 3600"))
    eventually(
        "Pod sleeper Running",
        lambda: "Running" in cluster.kubectl("get", "pod", "-n", namespace, "sleeper").stdout,
    )
    real_node.stop()
    assert cleanup.leftovers(real_node.spec, real_node.root, real_node.sysctls.absent) == []
    real_node.start()
    assert real_node.ready()
    cluster.kubectl("delete", "pod", "-n", namespace, "sleeper", "--wait=false")
    apply(cluster, namespace, pod("again", "echo again"))
    assert finished_log(cluster, namespace, "again").strip() == "again"
