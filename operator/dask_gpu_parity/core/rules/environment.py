"""DGP007/DGP008: the scheduler gets the workers' software and UCX settings."""

from __future__ import annotations

from collections.abc import Mapping

from dask_gpu_parity.core.findings import Finding
from dask_gpu_parity.core.gpu import env_value
from dask_gpu_parity.core.plain import as_list

from .context import Context

__all__ = ["environment"]

_ENV_NAMES = ("EXTRA_PIP_PACKAGES", "EXTRA_CONDA_PACKAGES", "EXTRA_APT_PACKAGES")
_ENV_PREFIXES = ("UCX_", "DASK_DISTRIBUTED_UCXX__", "DASK_DISTRIBUTED__COMM__UCX__")
_CREATE_CONTEXT = "DASK_DISTRIBUTED_UCXX__CREATE_CUDA_CONTEXT"
_TRUE = ("true", "1", "yes")


def environment(ctx: Context) -> list[Finding]:
    """Copy the workers' package and UCX settings; a UCX scheduler creates a CUDA context."""
    scheduler = ctx.view.scheduler.container
    findings: list[Finding] = []
    env = scheduler.get("env")
    if env is None:
        env = []
    if not isinstance(env, list):
        return findings
    have = {e["name"]: e for e in env if isinstance(e, Mapping) and isinstance(e.get("name"), str)}
    path = f"{ctx.view.scheduler.container_ptr}/env"
    for entry in as_list(ctx.view.worker.container.get("env")):
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
        value = env_value(scheduler, _CREATE_CONTEXT)
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
    if env and scheduler.get("env") is None:  # absent, or null (which the API drops)
        scheduler["env"] = env
    return findings
