"""``audit``'s grammar: its flags, examples and exit codes in ``--help``."""

from __future__ import annotations

import argparse
from typing import Any

__all__ = ["AUDIT_FORMATS", "add_audit"]

# The report formats (cli/audit_report.py renders them). Here, not there: building the parser
# for any command must not import the audit machinery (`check`'s start-up).
AUDIT_FORMATS = ("text", "json", "sarif", "policyreport")

_AUDIT_EPILOG = """\
examples:
  dask-gpu-parity audit -A
  kubectl dask-gpu-parity audit -n team-a -o json
  dask-gpu-parity audit -A -o policyreport | kubectl apply -f -

Read-only: lists Dask resources, nodes, DRA ResourceSlices and DeviceClasses,
DaskGPUPolicies, namespaces and the Dask Pods (the ClusterRole it needs is in
docs/operator.md, "Audit"). Verdicts: ok, drift, check-failed, findings,
pending, no-gpu, skipped.

exit codes:
  0  no drift, no failed GPU check, no finding at or above --fail-on
  1  a drift or a failed check, or findings at or above --fail-on
  2  the cluster cannot be read: no kubeconfig, an API server that cannot be
     reached, credentials refused, a verb RBAC forbids (named), a bad flag"""


def add_audit(commands: Any) -> None:
    """Add ``audit`` and its flags to the subcommands."""
    summary = "report a live cluster's Dask resources and their parity now"
    sub: argparse.ArgumentParser = commands.add_parser(
        "audit",
        help=summary,
        description=summary[0].upper() + summary[1:] + ".",
        epilog=_AUDIT_EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    sub.add_argument("--kubeconfig", metavar="FILE", help="kubeconfig (default: as kubectl)")
    sub.add_argument("--context", help="kubeconfig context (default: the current one)")
    where = sub.add_mutually_exclusive_group()
    where.add_argument("-n", "--namespace", help="namespace (default: the context's)")
    where.add_argument("-A", "--all-namespaces", action="store_true", help="every namespace")
    sub.add_argument(
        "-o",
        "--output",
        choices=AUDIT_FORMATS,
        default="text",
        help="text, json, sarif, or policyreport (wgpolicyk8s.io/v1alpha2 YAML; default: text)",
    )
    sub.add_argument(
        "--fail-on",
        choices=("error", "warning"),
        default="error",
        help="lowest finding severity that makes the exit code 1 (default: error)",
    )
    sub.add_argument("--exit-zero", action="store_true", help="exit 0 even with findings")
    sub.add_argument(
        "--request-timeout",
        type=float,
        default=30.0,
        metavar="SECONDS",
        help="per request (default 30)",
    )
