"""Rendering the chart with helm, and finding objects in the result (no cluster needed)."""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any, NoReturn

import yaml

from provingground.process import Tool, helm_env
from provingground.pytest_plugin import skip_or_fail

REPO = Path(__file__).resolve().parents[2]
CHART = REPO / "charts" / "dask-gpu-parity"
CI_VALUES = sorted(p.name for p in (CHART / "ci").glob("*-values.yaml"))
TOOLS = REPO / ".cache" / "chart-tools" / "bin"  # `make chart-tools`: checkov, hadolint
RELEASE = "dask-gpu-parity"
NAMESPACE = "dgp-system"
TOOLS_HINT = "run `make chart-tools` (checkov and hadolint into .cache/chart-tools)"

# Exactly what the operator calls (operator/dask_gpu_parity/admission.py and kube.py with kopf
# 1.45), as (API group, resource, verb). The chart README lists the same rows; test_render checks
# both. Every Pod: the webhooks' indices and reading one DaskCluster per GPU worker group.
VERBS_USED = frozenset(
    {
        ("gpuparity.dask.org", "daskgpupolicies", "list"),
        ("gpuparity.dask.org", "daskgpupolicies", "watch"),
        ("kubernetes.dask.org", "daskclusters", "get"),
        ("", "namespaces", "list"),
        ("", "namespaces", "watch"),
        ("", "nodes", "list"),
        ("", "nodes", "watch"),
        ("resource.k8s.io", "deviceclasses", "list"),
        ("resource.k8s.io", "deviceclasses", "watch"),
        ("resource.k8s.io", "resourceslices", "list"),
        ("resource.k8s.io", "resourceslices", "watch"),
        ("apiextensions.k8s.io", "customresourcedefinitions", "list"),
        ("apiextensions.k8s.io", "customresourcedefinitions", "watch"),
    }
)
# Only with drift.enabled: the drift watch indexes DaskClusters, watches scheduler Deployments and
# posts the only Events (kopf posts none by itself: settings.posting.loggers is off).
DRIFT_VERBS = frozenset(
    {
        ("kubernetes.dask.org", "daskclusters", "list"),
        ("kubernetes.dask.org", "daskclusters", "watch"),
        ("apps", "deployments", "list"),
        ("apps", "deployments", "watch"),
        ("", "pods", "list"),
        ("", "pods", "watch"),
        ("", "events", "create"),
    }
)
REPAIR_VERBS = frozenset({("apps", "deployments", "patch")})
REPORT_VERBS = frozenset(
    ("wgpolicyk8s.io", "policyreports", verb) for verb in ("list", "create", "patch", "delete")
)
MUTATING = ("mutate-daskcluster", "mutate-daskjob", "mutate-gateway-daskcluster")
VALIDATING = (
    "validate-daskcluster",
    "validate-daskjob",
    "validate-daskworkergroup",
    "validate-gateway-daskcluster",
)


class Helm(Tool):
    """The proving-ground helm binary, run with a private home; a failed call fails the test."""

    def __init__(self, binary: Path, home: Path, kubeconfig: Path | None = None) -> None:
        super().__init__([binary], helm_env(home, kubeconfig), error=AssertionError)

    def template_args(
        self,
        values: Sequence[str] = (),
        sets: Mapping[str, Any] | None = None,
        *,
        release: str = RELEASE,
        namespace: str = NAMESPACE,
    ) -> list[str]:
        """Arguments of ``helm template`` (or install/upgrade after the verb)."""
        args = [release, str(CHART), "--namespace", namespace]
        for name in values:
            args += ["--values", str(CHART / "ci" / name) if "/" not in name else name]
        for key, value in (sets or {}).items():
            if isinstance(value, str):
                args += ["--set-string", f"{key}={value}"]
            else:  # numbers and booleans, as YAML spells them
                args += ["--set", f"{key}={json.dumps(value)}"]
        return args

    def template(
        self,
        values: Sequence[str] = (),
        sets: Mapping[str, Any] | None = None,
        *,
        release: str = RELEASE,
        namespace: str = NAMESPACE,
    ) -> list[dict[str, Any]]:
        """Render the chart; return its objects."""
        args = self.template_args(values, sets, release=release, namespace=namespace)
        out = self.run("template", *args).stdout
        return [d for d in yaml.safe_load_all(out) if d]


def find(objects: Iterable[Mapping[str, Any]], kind: str, name: str | None = None) -> list[Any]:
    """Objects of ``kind`` (and ``name``)."""
    return [
        o for o in objects if o["kind"] == kind and (name is None or o["metadata"]["name"] == name)
    ]


def one(objects: Iterable[Mapping[str, Any]], kind: str, name: str | None = None) -> Any:
    """The single object of ``kind`` (and ``name``)."""
    found = find(objects, kind, name)
    assert len(found) == 1, f"expected one {kind} {name or ''}, found {len(found)}"
    return found[0]


def rbac_rows(objects: Iterable[Mapping[str, Any]]) -> set[tuple[str, str, str]]:
    """Every (group, resource, verb) the chart's ClusterRoles and Roles grant."""
    rows = set()
    for role in (o for o in objects if o["kind"] in ("ClusterRole", "Role")):
        for rule in role.get("rules", []):
            for group in rule.get("apiGroups", []):
                for resource in rule.get("resources", []):
                    for verb in rule.get("verbs", []):
                        rows.add((group, resource, verb))
    return rows


def missing(reason: str) -> NoReturn:
    """Skip for want of a tool or binary, or fail where ``$CI`` is set (chart tests must run)."""
    skip_or_fail(reason, "chart tests must run, not skip")
