"""The chart's PrometheusRule and Grafana dashboard: promtool on the rules as rendered, and every
metric a query names is one the operator exports (read from its registry, so a renamed metric
fails here)."""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
from pathlib import Path
from typing import Any

import pytest
import yaml

from dask_gpu_parity.admission.runtime import events, metrics

from .helpers import CHART, NAMESPACE, RELEASE, REPO, find, missing, one

PROMTOOL_TESTS = Path(__file__).parent / "promtool" / "alerts-test.yaml"
MONITORING = ["monitoring-values.yaml"]
RUNBOOKS = REPO / "docs" / "operator.md"


def _promtool() -> Path:
    """promtool as chart.mk builds it (`make promtool`), at the version chart.mk pins."""
    pinned = re.search(
        r"^PROMTOOL_VERSION := (\S+)$",
        (CHART.parents[1] / "tests/chart/chart.mk").read_text(),
        re.M,
    )
    assert pinned, "chart.mk pins no PROMTOOL_VERSION"
    cache = Path(os.environ.get("DGP_CACHE") or Path.home() / ".cache" / "dask-gpu-parity")
    return cache / "bin" / f"promtool-{pinned.group(1)}" / "promtool"


@pytest.fixture(scope="module")
def promtool() -> Path:
    path = _promtool()
    if not path.is_file():
        missing(f"{path} not found: run `make promtool`")
    return path


@pytest.fixture(scope="module")
def rule(helm) -> dict[str, Any]:
    return one(helm.template(MONITORING), "PrometheusRule")


def _alerts(rule: dict[str, Any]) -> list[dict[str, Any]]:
    return [r for group in rule["spec"]["groups"] for r in group["rules"] if "alert" in r]


def _exported() -> set[str]:
    """Every series name the operator's registry exposes, as Prometheus scrapes them."""
    metrics.publish(metrics.Snapshot(drift=metrics.DriftFigures(first_pass_seconds=1.0)))
    try:
        names = set()
        for family in metrics.REGISTRY.collect():
            suffixes = {
                "counter": ("_total",),
                "histogram": ("_bucket", "_sum", "_count"),
                "gauge": ("",),
            }[family.type]
            names |= {family.name + s for s in suffixes}
        return names
    finally:
        metrics.publish(metrics.Snapshot())


def _dgp_names(expr: str) -> set[str]:
    return set(re.findall(r"\bdgp_[a-z_]+\b", expr))


def test_promtool_checks_and_unit_tests_the_shipped_rules(rule, promtool, tmp_path):
    (tmp_path / "rules.yaml").write_text(yaml.safe_dump(rule["spec"], sort_keys=False))
    shutil.copy(PROMTOOL_TESTS, tmp_path / "alerts-test.yaml")
    for args in (["check", "rules", "rules.yaml"], ["test", "rules", "alerts-test.yaml"]):
        done = subprocess.run(
            [promtool, *args],
            check=False,
            cwd=tmp_path,
            capture_output=True,
            text=True,
            timeout=120,
        )
        assert done.returncode == 0, done.stdout + done.stderr


def test_every_alert_has_a_firing_and_a_quiet_promtool_case(rule):
    tests = yaml.safe_load(PROMTOOL_TESTS.read_text())["tests"]
    firing, quiet = set(), set()
    for case in tests:
        for check in case["alert_rule_test"]:
            (firing if check["exp_alerts"] else quiet).add(check["alertname"])
    names = {a["alert"] for a in _alerts(rule)}
    assert len(names) == len(_alerts(rule)) >= 11
    assert names == firing == quiet


def test_every_alert_links_a_runbook_section(rule):
    headings = {
        re.sub(r"[^a-z0-9 -]", "", line.lstrip("#").strip().lower()).replace(" ", "-")
        for line in RUNBOOKS.read_text().splitlines()
        if line.startswith("### ")
    }
    for alert in _alerts(rule):
        url = alert["annotations"]["runbook_url"]
        page, _, anchor = url.partition("#")
        assert page.endswith("/docs/operator.md"), url
        assert anchor == alert["alert"].lower(), alert["alert"]
        assert anchor in headings, alert["alert"]
        assert alert["labels"]["severity"] in ("critical", "warning")


def test_alert_and_dashboard_queries_use_only_exported_metrics(rule):
    exported = _exported()
    used: set[str] = set()
    for alert in _alerts(rule):
        used |= _dgp_names(alert["expr"])
    dashboard = json.loads((CHART / "dashboards" / "dask-gpu-parity.json").read_text())
    for panel in dashboard["panels"]:
        for target in panel.get("targets", []):
            used |= _dgp_names(target["expr"])
    for variable in dashboard["templating"]["list"]:
        used |= _dgp_names(variable.get("definition", ""))
    assert used, "no dgp_ metric found in the queries"
    assert used <= exported, f"not exported by the operator: {sorted(used - exported)}"
    # Every family is on the dashboard: a new metric gets a panel.
    families = {n.removesuffix("_bucket").removesuffix("_total") for n in used}
    assert {f.name for f in metrics.REGISTRY.collect()} <= families


def test_rule_selects_the_service_monitors_scrape(helm, rule):
    objects = helm.template(MONITORING)
    service = one(objects, "Service", f"{RELEASE}-metrics")
    for alert in _alerts(rule):
        assert f'job="{service["metadata"]["name"]}", namespace="{NAMESPACE}"' in alert["expr"]
    queue = next(a for a in _alerts(rule) if a["alert"] == "DaskGPUParityEventQueueSaturated")
    assert int(queue["expr"].rsplit(">", 1)[1]) < events.QUEUE


def test_monitoring_objects_are_off_by_default_and_follow_values(helm):
    defaults = helm.template()
    assert find(defaults, "PrometheusRule") == []
    assert [c for c in find(defaults, "ConfigMap") if "dashboard" in c["metadata"]["name"]] == []
    no_drift = helm.template(MONITORING, {"drift.enabled": False})
    groups = {g["name"] for g in one(no_drift, "PrometheusRule")["spec"]["groups"]}
    assert groups == {"dask-gpu-parity.webhooks", "dask-gpu-parity.inventory"}
    objects = helm.template(
        MONITORING,
        {"metrics.dashboard.namespace": "monitoring", "metrics.prometheusRule.driftFor": "2h"},
    )
    drift = next(
        a
        for a in _alerts(one(objects, "PrometheusRule"))
        if a["alert"] == "DaskGPUParityClusterDrift"
    )
    assert drift["for"] == "2h"
    board = one(objects, "ConfigMap", f"{RELEASE}-dashboard")
    assert board["metadata"]["namespace"] == "monitoring"
    assert board["metadata"]["labels"]["grafana_dashboard"] == "1"
    assert board["metadata"]["annotations"] == {"grafana_folder": "Dask"}
    shipped = json.loads((CHART / "dashboards" / "dask-gpu-parity.json").read_text())
    assert json.loads(board["data"]["dask-gpu-parity.json"]) == shipped


def test_dashboard_panels_are_laid_out_and_query_the_selected_job():
    dashboard = json.loads((CHART / "dashboards" / "dask-gpu-parity.json").read_text())
    assert dashboard["uid"] == "dask-gpu-parity"
    ids = [p["id"] for p in dashboard["panels"]]
    assert len(ids) == len(set(ids))
    for panel in dashboard["panels"]:
        if panel["type"] == "row":
            continue
        assert panel["title"], panel["id"]
        assert panel["description"], panel["id"]
        for target in panel["targets"]:
            assert 'job=~"$job", namespace=~"$namespace"' in target["expr"], panel["title"]
