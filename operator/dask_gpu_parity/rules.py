"""The scheduler parity rules for a GPU DaskCluster or DaskJob (DESIGN.md §4).

Each rule reads the patched document, appends its findings and, when the fix is safe, sets
what parity needs in place. Rules that would overwrite something the user wrote report an
error instead (GitOps would fight the change).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from . import placement_rules
from .findings import Finding, Severity
from .gpu import (
    GpuRequest,
    as_list,
    containers,
    env_value,
    gpu_requests,
    primary_container,
    protocol,
)
from .patch import pointer
from .placement import Inventory
from .policy import Placement, Policy
from .resources import DaskResource, get_in
from .verifier import CONTAINER_NAME, init_container

__all__ = ["Context", "cluster_parity"]

_ENV_NAMES = ("EXTRA_PIP_PACKAGES", "EXTRA_CONDA_PACKAGES", "EXTRA_APT_PACKAGES")
_ENV_PREFIXES = ("UCX_", "DASK_DISTRIBUTED_UCXX__", "DASK_DISTRIBUTED__COMM__UCX__")
_CREATE_CONTEXT = "DASK_DISTRIBUTED_UCXX__CREATE_CUDA_CONTEXT"
_TRUE = ("true", "1", "yes")


class Context:
    """Where the scheduler and worker containers are, resolved once for all rules."""

    def __init__(  # noqa: PLR0917  # built in one place, from one call
        self,
        scheduler_spec: dict[str, Any],
        scheduler_ptr: str,
        scheduler_index: int,
        worker_spec: dict[str, Any],
        worker_ptr: str,
        worker: Mapping[str, Any],
        worker_gpus: list[GpuRequest],
        policy: Policy,
    ) -> None:
        self.scheduler_spec = scheduler_spec
        self.scheduler_ptr = scheduler_ptr
        self.scheduler: dict[str, Any] = scheduler_spec["containers"][scheduler_index]
        self.container_ptr = f"{scheduler_ptr}/containers/{scheduler_index}"
        self.worker_spec = worker_spec
        self.worker_ptr = worker_ptr
        self.worker = worker
        self.worker_gpus = worker_gpus
        self.policy = policy
        self.gpu_resource = policy.scheduler_gpu_resource or worker_gpus[0].resource
        self.ucx = protocol(scheduler_spec, worker_spec) == "ucx"

    @staticmethod
    def copy_or_report(
        target: dict[str, Any],
        target_ptr: str,
        key: str,
        want: Any,
        *,
        code: str,
        copied: str,
        differs: Callable[[Any], str],
    ) -> list[Finding]:
        """Give ``target[key]`` (at ``target_ptr``) the workers' value ``want``.

        Absent or empty, it is copied (message ``copied``); another value is the user's choice
        and is reported, not overwritten (message ``differs(value)``).
        """
        have = target.get(key)
        if not isinstance(want, str) or not want or have == want:
            return []
        path = target_ptr + pointer(key)
        if have is None or have == "":
            target[key] = want
            return [Finding.of(code, path, copied)]
        return [Finding.of(code, path, differs(have), fixable=False)]


def cluster_parity(
    patched: dict[str, Any],
    dask: DaskResource,
    policy: Policy,
    inventory: Inventory | None,
    worker_gpus: list[GpuRequest],
) -> list[Finding]:
    """Run every scheduler rule on a GPU DaskCluster or DaskJob, fixing ``patched`` in place."""
    assert dask.scheduler_path is not None  # evaluate() routes clusters and jobs only
    assert dask.worker_path is not None
    scheduler_spec = get_in(patched, dask.scheduler_path)
    worker_spec = get_in(patched, dask.worker_path)
    worker = primary_container(worker_spec)
    index = _scheduler_index(scheduler_spec)
    if index is None or worker is None or not isinstance(worker_spec, dict):
        return []  # malformed: the schema rule has already said what is wrong
    ctx = Context(
        scheduler_spec,
        pointer(*dask.scheduler_path),
        index,
        worker_spec,
        pointer(*dask.worker_path),
        worker[1],
        worker_gpus,
        policy,
    )
    findings = _gpu(ctx) + _image(ctx)
    if dask.job_runner_path is not None:
        findings += _job_runner(patched, dask.job_runner_path, ctx)
    findings += _environment(ctx)
    pinned = None
    if policy.placement is not Placement.NONE:
        findings += placement_rules.copy_worker_constraints(ctx)
        if inventory is not None:
            pin_findings, pinned = placement_rules.pin_driver_class(ctx, inventory)
            findings += pin_findings
    findings += _verifier(ctx, pinned.driver if pinned and policy.verifier_expect_driver else None)
    if inventory is not None:
        findings += placement_rules.schedulable(ctx, inventory)
    return findings


def _scheduler_index(spec: Any) -> int | None:
    found = list(containers(spec))
    if not found or not isinstance(spec, dict):
        return None
    for index, container in found:
        if container.get("name") == "scheduler" and isinstance(container, dict):
            return index
    index, container = found[0]
    return index if isinstance(container, dict) else None


def _gpu(ctx: Context) -> list[Finding]:
    """DGP001/DGP002: the scheduler requests one unit of the workers' GPU resource."""
    scheduler_gpus = gpu_requests(ctx.scheduler_spec)
    if scheduler_gpus:
        if ctx.gpu_resource in {r.resource for r in scheduler_gpus}:
            return []
        found = ", ".join(sorted({r.resource for r in scheduler_gpus}))
        return [
            Finding.of(
                "DGP002",
                f"{ctx.container_ptr}/resources",
                f"Scheduler requests {found} while parity expects {ctx.gpu_resource}: "
                "make sure it has the workers' driver and CUDA version, or set "
                "spec.scheduler.gpuResource in the DaskGPUPolicy",
            )
        ]
    count = str(ctx.policy.scheduler_gpu_count)
    why = (
        "under UCX, GPU buffers go through the scheduler"
        if ctx.ucx
        else "under TCP the scheduler still unpickles task graphs holding GPU objects"
    )
    sections = ["limits"] + (
        ["requests"] if any(r.section == "requests" for r in ctx.worker_gpus) else []
    )
    fixable = _set_resources(ctx.scheduler, sections, ctx.gpu_resource, count)
    return [
        Finding.of(
            "DGP001",
            f"{ctx.container_ptr}/resources",
            f"Scheduler requests no GPU while the workers request {ctx.worker_gpus[0].resource}: "
            f'{why} and fails without CUDA; give it {ctx.gpu_resource}: "{count}"',
            severity=Severity.ERROR if ctx.ucx else ctx.policy.tcp_severity,
            fixable=fixable,
        )
    ]


def _set_resources(container: dict[str, Any], sections: list[str], name: str, value: str) -> bool:
    if container.get("resources") is None:  # absent, or null (which the API drops)
        container["resources"] = {}
    resources = container["resources"]
    if not isinstance(resources, dict):
        return False
    for section in sections:
        if resources.get(section) is None:
            resources[section] = {}
        if not isinstance(resources[section], dict):
            return False
    for section in sections:
        resources[section][name] = value
    return True


def _image(ctx: Context) -> list[Finding]:
    """DGP003: the scheduler runs the workers' image."""
    want = ctx.worker.get("image")
    return ctx.copy_or_report(
        ctx.scheduler,
        ctx.container_ptr,
        "image",
        want,
        code="DGP003",
        copied=f"Scheduler has no image: set the workers' image {want}",
        differs=lambda have: (
            f"Scheduler image {have} differs from the workers' image {want}: the scheduler "
            "deserializes the workers' objects and needs the same environment; use the same image"
        ),
    )


def _job_runner(patched: dict[str, Any], path: tuple[Any, ...], ctx: Context) -> list[Finding]:
    """DGP016: a DaskJob's runner (the client) uses the workers' image."""
    runner = primary_container(get_in(patched, path))
    want = ctx.worker.get("image")
    if runner is None or not isinstance(want, str):
        return []
    have = runner[1].get("image")
    if not isinstance(have, str) or have == want:
        return []
    return [
        Finding.of(
            "DGP016",
            f"{pointer(*path)}/containers/{runner[0]}/image",
            f"Job runner image {have} differs from the workers' image {want}: the client "
            "pickles the graph that the workers and scheduler unpickle; use the same image",
        )
    ]


def _environment(ctx: Context) -> list[Finding]:
    """DGP007/DGP008: the scheduler gets the workers' software and UCX settings."""
    findings: list[Finding] = []
    env = ctx.scheduler.get("env")
    if env is None:
        env = []
    if not isinstance(env, list):
        return findings
    have = {e["name"]: e for e in env if isinstance(e, Mapping) and isinstance(e.get("name"), str)}
    path = f"{ctx.container_ptr}/env"
    for entry in as_list(ctx.worker.get("env")):
        if not isinstance(entry, Mapping) or not isinstance(entry.get("name"), str):
            continue
        name = entry["name"]
        if not (name in _ENV_NAMES or name.startswith(_ENV_PREFIXES)) or name == _CREATE_CONTEXT:
            continue
        if name not in have:
            env.append(dict(entry))
            findings.append(
                Finding.of("DGP007", path, f"Scheduler lacks the workers' {name}: copied it")
            )
        elif have[name] != entry:
            findings.append(
                Finding.of(
                    "DGP007",
                    path,
                    f"Scheduler's {name} differs from the workers': use the same value",
                    fixable=False,
                )
            )
    if ctx.ucx:
        value = env_value(ctx.scheduler, _CREATE_CONTEXT)
        if value is None and _CREATE_CONTEXT not in have:
            env.append({"name": _CREATE_CONTEXT, "value": "True"})
            findings.append(
                Finding.of(
                    "DGP008",
                    path,
                    f"UCX scheduler without {_CREATE_CONTEXT}=True cannot receive GPU "
                    "buffers: set it",
                )
            )
        elif (value or "").strip().lower() not in _TRUE:
            findings.append(
                Finding.of(
                    "DGP008",
                    path,
                    f"UCX scheduler sets {_CREATE_CONTEXT}={value!r}: it must be True to "
                    "receive GPU buffers",
                    fixable=False,
                )
            )
    if env and ctx.scheduler.get("env") is None:  # absent, or null (which the API drops)
        ctx.scheduler["env"] = env
    return findings


def _verifier(ctx: Context, expect_driver: str | None) -> list[Finding]:
    """DGP009: the scheduler pod proves its GPU before the scheduler starts."""
    policy = ctx.policy
    if not policy.verifier_enabled:
        return []
    init = ctx.scheduler_spec.get("initContainers")
    if init is None:
        init = []
    if not isinstance(init, list) or any(
        isinstance(c, Mapping) and c.get("name") == CONTAINER_NAME for c in init
    ):
        return []
    gpus = gpu_requests(ctx.scheduler_spec)
    if not gpus or not ctx.scheduler.get("image"):
        return []  # DGP001/DGP003 could not be fixed; the verifier would not run
    init.append(
        init_container(
            ctx.scheduler,
            gpu_resource=gpus[0].resource,
            gpu_count=str(gpus[0].quantity),
            expect_driver=expect_driver,
            min_compute_capability=policy.verifier_min_compute_capability,
            image=policy.verifier_image,
            cpu=policy.verifier_cpu,
            memory=policy.verifier_memory,
        )
    )
    ctx.scheduler_spec["initContainers"] = init
    return [
        Finding.of(
            "DGP009",
            f"{ctx.scheduler_ptr}/initContainers",
            f"Scheduler pod does not prove its GPU before starting: add the {CONTAINER_NAME} "
            "init container (fails fast with the reason instead of a hang or a pickling error)",
        )
    ]
