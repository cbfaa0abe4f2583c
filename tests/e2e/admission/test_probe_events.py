"""A scheduler's failed GPU check reaches the Events, once per failure, across operator restarts.

kubelet shows the ``gpu-parity-check`` termination message in ``kubectl describe pod`` only;
its Events say ``BackOff``. The operator posts a ``GPUParityCheckFailed`` Event with the reason.

kwok nodes run no containers, and kwok's ``pod-ready`` Stage rewrites the status of every
Pending pod on a node it manages (every init container ``Completed``, exit 0, phase
``Running``): a failing status written there would be overwritten at once. So the failing
scheduler pods are bound (``spec.nodeName``) to a Node without kwok's annotation and without a
kubelet, cordoned and tainted so that nothing else is scheduled there, and the test writes their
status through the ``pods/status`` subresource, in the order kubelet writes it for an init
container that fails, is restarted and fails again. The pod spec is the scheduler Deployment's
template as the dask operator built it from the mutated DaskCluster, so it carries the verifier
our webhook injected.
"""

from __future__ import annotations

import datetime as dt
import json
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import pytest
from kubernetes import client
from kubernetes.client.exceptions import ApiException

from provingground.parity import eventually, example

pytestmark = [pytest.mark.e2e, pytest.mark.timeout(600)]
CLUSTER = "rapids-tcp"
REASON = "GPUParityCheckFailed"
CHECK = "gpu-parity-check"
WHY = (
    'Expected CUDA_VISIBLE_DEVICES unset or naming a GPU, found "", which hides every GPU from '
    "CUDA while NVML and nvidia-smi still show them: remove it from the scheduler container's env"
)


@dataclass
class Ground:
    namespace: str
    node: str  # no kubelet, not kwok's
    template: dict[str, Any]  # the scheduler Deployment's pod template (metadata and spec)


def _stamp(at: dt.datetime) -> str:
    return at.strftime("%Y-%m-%dT%H:%M:%SZ")


def _ended(code: int, at: dt.datetime, run: str, message: str = "") -> dict[str, Any]:
    terminated = {
        "exitCode": code,
        "reason": "Completed" if code == 0 else "Error",
        "startedAt": _stamp(at - dt.timedelta(seconds=1)),
        "finishedAt": _stamp(at),
        "containerID": f"containerd://{run}",
    }
    if message:
        terminated["message"] = message + "\n"  # the probe ends its line
    return {"terminated": terminated}


@pytest.fixture(scope="module")
def ground(parity, cluster) -> Iterator[Ground]:
    """A GPU DaskCluster admitted through our webhooks, and a Node that no kubelet runs."""
    namespace = f"e2e-probe-events-{uuid.uuid4().hex[:5]}"
    node = f"e2e-no-kubelet-{uuid.uuid4().hex[:5]}"
    cluster.kubectl("create", "namespace", namespace)
    node_doc = {
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {"name": node, "labels": {"kubernetes.io/hostname": node}},
        "spec": {
            "unschedulable": True,
            "taints": [{"key": "e2e.gpuparity.dask.org/no-kubelet", "effect": "NoSchedule"}],
        },
    }
    cluster.kubectl("create", "-f", "-", input=json.dumps(node_doc))
    try:
        doc = example("gpu-cluster-tcp.yaml", namespace=namespace)
        doc["spec"]["worker"]["replicas"] = 0
        cluster.kubectl("apply", "-f", "-", input=json.dumps(doc))
        apps = client.AppsV1Api(cluster.api)

        def template() -> dict[str, Any]:
            deployment = apps.read_namespaced_deployment(f"{CLUSTER}-scheduler", namespace)
            return cluster.api.sanitize_for_serialization(deployment.spec.template)

        found = eventually(template, timeout=120, retry_on=(ApiException,))
        names = [c["name"] for c in found["spec"].get("initContainers", [])]
        assert CHECK in names, names  # our webhook injected the verifier
        yield Ground(namespace, node, found)
    finally:
        # No kubelet confirms a graceful deletion there: force it, or the namespace never goes.
        cluster.kubectl(
            "delete",
            "pods",
            "-n",
            namespace,
            f"--field-selector=spec.nodeName={node}",
            "--grace-period=0",
            "--force",
            check=False,
        )
        cluster.release_namespace(namespace)
        cluster.kubectl("delete", "node", node, "--wait=false", check=False)


def _create_pod(cluster, ground: Ground, name: str) -> str:
    """The scheduler's pod, bound to the kubelet-less node; returns its uid."""
    spec = json.loads(json.dumps(ground.template["spec"]))
    spec["nodeName"] = ground.node
    spec["tolerations"] = [*spec.get("tolerations", []), {"operator": "Exists"}]  # no eviction
    pod = {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {
            "name": name,
            "namespace": ground.namespace,
            "labels": ground.template["metadata"]["labels"],
        },
        "spec": spec,
    }
    created = client.CoreV1Api(cluster.api).create_namespaced_pod(ground.namespace, pod)
    return str(created.metadata.uid)


def _write_status(
    cluster,
    ground: Ground,
    pod: str,
    *,
    state: dict[str, Any],
    now: dt.datetime,
    last: dict[str, Any] | None = None,
    restarts: int = 0,
) -> None:
    """What kubelet writes (pods/status) while ``gpu-parity-check`` fails."""
    init: list[dict[str, Any]] = []
    for container in ground.template["spec"]["initContainers"]:
        status: dict[str, Any] = {
            "name": container["name"],
            "image": container["image"],
            "imageID": "",
            "ready": False,
            "started": False,
            "restartCount": 0,
        }
        if container["name"] == CHECK:
            status |= {"state": state, "restartCount": restarts}
            if last is not None:
                status["lastState"] = last
        else:  # the copy step before it passed
            status |= {"ready": True, "state": _ended(0, now - dt.timedelta(minutes=1), "copy")}
        init.append(status)
    waiting = {"waiting": {"reason": "PodInitializing"}}
    stamp = _stamp(now)
    incomplete = f"containers with incomplete status: [{CHECK}]"
    body = {
        "status": {
            "phase": "Pending",
            "startTime": stamp,
            "conditions": [
                {"type": "PodScheduled", "status": "True", "lastTransitionTime": stamp},
                {
                    "type": "Initialized",
                    "status": "False",
                    "reason": "ContainersNotInitialized",
                    "message": incomplete,
                    "lastTransitionTime": stamp,
                },
                {"type": "Ready", "status": "False", "lastTransitionTime": stamp},
                {"type": "ContainersReady", "status": "False", "lastTransitionTime": stamp},
            ],
            "initContainerStatuses": init,
            "containerStatuses": [
                {
                    "name": c["name"],
                    "image": c["image"],
                    "imageID": "",
                    "ready": False,
                    "started": False,
                    "restartCount": 0,
                    "state": waiting,
                }
                for c in ground.template["spec"]["containers"]
            ],
        }
    }
    cluster.kubectl(
        "patch",
        "pod",
        pod,
        "-n",
        ground.namespace,
        "--subresource=status",
        "--type=merge",
        "-p",
        json.dumps(body),
    )


def _probe_events(cluster, namespace: str, kind: str, name: str) -> list[client.CoreV1Event]:
    events = client.CoreV1Api(cluster.api).list_namespaced_event(namespace).items
    return sorted(
        (
            e
            for e in events
            if e.reason == REASON
            and e.involved_object.kind == kind
            and e.involved_object.name == name
        ),
        key=lambda e: e.message,
    )


def test_a_failed_gpu_check_is_posted_once_per_failure(parity, cluster, ground) -> None:
    ns = ground.namespace
    pod = f"{CLUSTER}-scheduler-no-kubelet"
    uid = _create_pod(cluster, ground, pod)
    t0 = dt.datetime.now(dt.UTC)
    run1 = _ended(1, t0, "run1", WHY)
    # The operator is shared with other modules: their Events may have met 409s already.
    exists = parity.metric("dgp_events_total", outcome="exists")

    # The first run fails: kubelet reports it as the container's state.
    _write_status(cluster, ground, pod, state=run1, now=t0)
    (event,) = eventually(lambda: _probe_events(cluster, ns, "Pod", pod), timeout=120)
    print(f"\n{event.type} {event.reason} {event.involved_object.field_path}: {event.message}")
    assert event.type == "Warning"
    assert event.involved_object.uid == uid
    assert event.involved_object.namespace == ns
    assert event.involved_object.field_path == f"spec.initContainers{{{CHECK}}}"
    assert event.message == (
        f"Init container {CHECK} failed its GPU check (exit code 1, restart count 0): {WHY}"
    )
    assert event.source.component == "dask-gpu-parity"
    assert event.count == 1
    (on_cluster,) = eventually(lambda: _probe_events(cluster, ns, "DaskCluster", CLUSTER))
    assert on_cluster.message.startswith(f"Scheduler pod {pod}: init container {CHECK} failed")
    assert on_cluster.message.endswith(WHY)

    # kubelet restarts the container and backs off: the same failure, as lastState, with the
    # restart count one up, then a status update that changes nothing about it.
    back_off = {"waiting": {"reason": "CrashLoopBackOff", "message": "back-off 10s restarting"}}
    running = {"running": {"startedAt": _stamp(t0)}}
    _write_status(cluster, ground, pod, state=running, last=run1, restarts=1, now=t0)
    _write_status(cluster, ground, pod, state=back_off, last=run1, restarts=1, now=t0)
    t = t0 + dt.timedelta(seconds=1)  # only the conditions' times change
    _write_status(cluster, ground, pod, state=back_off, last=run1, restarts=1, now=t)
    # A second pod's failure, written after them: once its Event is there, the pod watch has
    # delivered the updates before it (one stream, in order) and the operator has acted on them.
    other = f"{CLUSTER}-scheduler-no-kubelet-2"
    _create_pod(cluster, ground, other)
    _write_status(cluster, ground, other, state=_ended(2, t0, "other", "Probe error"), now=t0)
    eventually(lambda: _probe_events(cluster, ns, "Pod", other), timeout=120)
    assert len(_probe_events(cluster, ns, "Pod", pod)) == 1
    # Not posted again at all (not even refused as a duplicate): nothing more answered 409.
    assert parity.metric("dgp_events_total", outcome="exists") == exists

    # The second run fails too: a new failure, a second Event.
    t1 = t0 + dt.timedelta(seconds=12)
    run2 = _ended(1, t1, "run2", WHY)
    _write_status(cluster, ground, pod, state=run2, last=run1, restarts=1, now=t1)
    _write_status(cluster, ground, pod, state=back_off, last=run2, restarts=2, now=t1)

    def two() -> list[client.CoreV1Event]:
        found = _probe_events(cluster, ns, "Pod", pod)
        assert len(found) <= 2, [e.message for e in found]
        return found if len(found) == 2 else []

    first, second = sorted(eventually(two, timeout=120), key=lambda e: e.first_timestamp)
    assert "restart count 0" in first.message
    assert "restart count 1" in second.message

    # The operator restarts and lists the pods again: the latest failures are seen afresh, and
    # their Events (named after the failure) are already there.
    parity.restart()
    eventually(lambda: parity.metric("dgp_events_total", outcome="exists") >= 2, timeout=120)
    assert len(_probe_events(cluster, ns, "Pod", pod)) == 2
    assert len(_probe_events(cluster, ns, "Pod", other)) == 1
    assert len(_probe_events(cluster, ns, "DaskCluster", CLUSTER)) == 3


def test_the_scheduler_that_passed_gets_no_event(parity, cluster, ground) -> None:
    """The dask operator's own scheduler pod, on a kwok node: its verifier exited 0."""
    core = client.CoreV1Api(cluster.api)

    def running() -> bool:
        pods = core.list_namespaced_pod(
            ground.namespace, label_selector="dask.org/component=scheduler"
        ).items
        on_kwok = [p for p in pods if p.spec.node_name != ground.node]
        assert on_kwok
        assert all(p.status.phase == "Running" for p in on_kwok), on_kwok
        statuses = {s.name: s for p in on_kwok for s in p.status.init_container_statuses or []}
        assert statuses[CHECK].state.terminated.exit_code == 0
        return True

    eventually(running, timeout=120)
    for pod in core.list_namespaced_pod(ground.namespace).items:
        if pod.spec.node_name != ground.node:
            assert _probe_events(cluster, ground.namespace, "Pod", pod.metadata.name) == []
