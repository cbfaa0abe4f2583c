"""How many calls of our webhooks a create costs, as the API server counts them.

Shared by the match-condition tests of the dask operator's kinds (``admission/``) and of the
gateway's ``DaskCluster`` (``gateway/``).
"""

from __future__ import annotations

import json
from typing import Any

METRIC = "apiserver_admission_webhook_request_total"


def webhook_calls(kubectl) -> dict[str, float]:
    """Our webhooks' calls so far, by webhook name, as the API server counts them."""
    text = kubectl("get", "--raw", "/metrics").stdout
    calls: dict[str, float] = {}
    for line in text.splitlines():
        if line.startswith(METRIC + "{") and ".gpuparity.dask.org" in line:
            labels, value = line[len(METRIC) + 1 :].rsplit("} ", 1)
            name = dict(p.split("=", 1) for p in labels.split(",") if "=" in p)["name"].strip('"')
            calls[name] = calls.get(name, 0.0) + float(value)
    return calls


def calls_for(kubectl, doc: dict[str, Any]) -> dict[str, float]:
    """The webhook calls one dry-run create of ``doc`` costs."""
    before = webhook_calls(kubectl)
    # allowed or denied (a shared GPU has no node here: DGP013), the calls are what counts
    kubectl("create", "--dry-run=server", "-o", "json", "-f", "-", input=json.dumps(doc))
    after = webhook_calls(kubectl)
    return {k.split(".")[0]: v - before.get(k, 0.0) for k, v in after.items() if v != before.get(k)}
