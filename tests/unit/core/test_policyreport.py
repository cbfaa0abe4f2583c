"""The PolicyReport of one Dask resource: Kyverno's per-resource layout, results by severity."""

from __future__ import annotations

from dask_gpu_parity.core.findings import Finding, Severity
from dask_gpu_parity.core.policyreport import (
    DIGEST_ANNOTATION,
    Subject,
    digest,
    outcome,
    passed,
    policy_report,
)

CLUSTER = Subject("kubernetes.dask.org/v1", "DaskCluster", "team", "rapids", "0b9e")
PATH = "/spec/scheduler/spec/containers/0/resources/limits"


def _finding(code: str, severity: Severity) -> Finding:
    return Finding(code, severity, PATH, "Scheduler has no GPU", fixable=True)


def test_errors_fail_warnings_warn_and_the_summary_counts_them() -> None:
    found = [_finding("DGP001", Severity.ERROR), _finding("DGP002", Severity.WARNING)]
    report = policy_report(CLUSTER, [outcome(f) for f in found], 1_700_000_000)
    assert [(r["rule"], r["result"], r["severity"]) for r in report["results"]] == [
        ("DGP001", "fail", "high"),
        ("DGP002", "warn", "medium"),
    ]
    assert report["results"][0]["message"] == f"{PATH}: Scheduler has no GPU"
    assert report["results"][0]["timestamp"] == {"seconds": 1_700_000_000, "nanos": 0}
    assert report["summary"] == {"pass": 0, "fail": 1, "warn": 1, "error": 0, "skip": 0}


def test_the_report_is_scoped_to_and_owned_by_its_resource() -> None:
    report = policy_report(CLUSTER, [passed("ok")], 0)
    assert report["metadata"]["name"] == "dask-gpu-parity-0b9e"
    assert report["metadata"]["labels"] == {"app.kubernetes.io/managed-by": "dask-gpu-parity"}
    assert report["scope"] == {
        "apiVersion": "kubernetes.dask.org/v1",
        "kind": "DaskCluster",
        "namespace": "team",
        "name": "rapids",
        "uid": "0b9e",
    }
    (owner,) = report["metadata"]["ownerReferences"]
    assert (owner["kind"], owner["name"], owner["uid"]) == ("DaskCluster", "rapids", "0b9e")
    assert "resources" not in report["results"][0]  # the scope says it, as in Kyverno's


def test_the_digest_follows_what_the_results_say_not_when() -> None:
    first = policy_report(CLUSTER, [passed("ok")], 1)
    later = policy_report(CLUSTER, [passed("ok")], 2)
    other = policy_report(CLUSTER, [passed("ok", (("verdict", "ok"),))], 1)
    annotation = [r["metadata"]["annotations"][DIGEST_ANNOTATION] for r in (first, later, other)]
    assert annotation[0] == annotation[1] != annotation[2]
    assert annotation[0] == digest([passed("ok")])
