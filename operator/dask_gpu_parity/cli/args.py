"""Each command's arguments, typed: built once from argparse's answer, then handed on.

The defaults stay in the grammar (``parser.py``); these objects hold what it answered.

The commands receive these frozen objects, not ``argparse.Namespace``: what a command reads is
named and typed here, and a flag renamed in the grammar (``parser.py``) breaks here, in one
place.
"""

from __future__ import annotations

import argparse
from collections.abc import Sequence
from dataclasses import dataclass

from dask_gpu_parity.core.findings import Severity
from dask_gpu_parity.core.policy import Delivery, ExtendedResourceToleration
from dask_gpu_parity.manifests import Selection

from .parser import PROBE_FLAGS, build_parser

__all__ = [
    "Arguments",
    "AuditArgs",
    "CheckArgs",
    "FixArgs",
    "InputArgs",
    "RunArgs",
    "VerifyArgs",
    "WebhookConfigArgs",
    "parse_args",
]


@dataclass(frozen=True, kw_only=True)
class InputArgs:
    """What ``check`` and ``fix`` read: the paths, the policy, the nodes, the overrides."""

    paths: tuple[str, ...]
    selection: Selection  # --exclude, --no-default-excludes, ..., --stdin-filename
    policy: str | None = None  # --policy FILE
    nodes: str | None = None  # --nodes FILE
    device_classes: str | None = None  # --device-classes FILE
    extended_resource_toleration: ExtendedResourceToleration | None = None
    verifier: Delivery | None = None  # --verifier
    probe_image: str | None = None
    probe_registry: str | None = None

    @property
    def stdin_filename(self) -> str:
        """The path stdin (``-``) is reported as (``--stdin-filename``; empty: none)."""
        return self.selection.stdin_filename


@dataclass(frozen=True, kw_only=True)
class CheckArgs:
    """``check``: the inputs, the report's format, what fails."""

    inputs: InputArgs
    output: str  # -o, one of manifests.report.FORMATS
    fail_on: Severity
    exit_zero: bool


@dataclass(frozen=True, kw_only=True)
class FixArgs:
    """``fix``: the inputs, and whether to rewrite them."""

    inputs: InputArgs
    in_place: bool


@dataclass(frozen=True, kw_only=True)
class VerifyArgs:
    """``verify-gpu``: the probe settings given, as the probe's own ``--flag=value`` arguments."""

    probe_argv: tuple[str, ...] = ()


@dataclass(frozen=True, kw_only=True)
class RunArgs:
    """``run``: where the operator serves, and how it logs."""

    tls_cert: str
    tls_key: str
    port: int
    address: str
    metrics_port: int
    health_port: int
    drift: bool  # not --no-drift
    policy_reports: bool  # not --no-policy-reports
    log_json: bool
    verbose: bool


@dataclass(frozen=True, kw_only=True)
class WebhookConfigArgs:
    """``webhook-config``: where the operator is and how the API server should call it."""

    url: str
    ca_file: str
    failure_policy: str
    timeout: int


@dataclass(frozen=True, kw_only=True)
class AuditArgs:
    """``audit``: which cluster and namespaces, the report's format, what fails."""

    kubeconfig: str | None
    context: str | None
    namespace: str | None  # -n; None: the context's namespace
    all_namespaces: bool  # -A
    output: str  # -o, one of cli.audit_parser.AUDIT_FORMATS
    fail_on: Severity
    exit_zero: bool
    request_timeout: float


Arguments = CheckArgs | FixArgs | VerifyArgs | RunArgs | WebhookConfigArgs | AuditArgs


def _inputs(ns: argparse.Namespace) -> InputArgs:
    return InputArgs(
        paths=tuple(ns.paths),
        selection=Selection(
            exclude=tuple(ns.exclude),
            default_excludes=not ns.no_default_excludes,
            respect_gitignore=not ns.no_respect_gitignore,
            force_exclude=ns.force_exclude,
            stdin_filename=ns.stdin_filename,
        ),
        policy=ns.policy,
        nodes=ns.nodes,
        device_classes=ns.device_classes,
        extended_resource_toleration=ns.extended_resource_toleration,
        verifier=Delivery(ns.verifier) if ns.verifier is not None else None,
        probe_image=ns.probe_image,
        probe_registry=ns.probe_registry,
    )


def parse_args(argv: Sequence[str] | None) -> Arguments:
    """The command line's arguments, typed (``InputError`` for a usage error)."""
    ns = build_parser().parse_args(argv)
    if ns.command == "check":
        return CheckArgs(
            inputs=_inputs(ns),
            output=ns.output,
            fail_on=Severity.parse(ns.fail_on),
            exit_zero=ns.exit_zero,
        )
    if ns.command == "audit":
        return AuditArgs(
            kubeconfig=ns.kubeconfig,
            context=ns.context,
            namespace=ns.namespace,
            all_namespaces=ns.all_namespaces,
            output=ns.output,
            fail_on=Severity.parse(ns.fail_on),
            exit_zero=ns.exit_zero,
            request_timeout=ns.request_timeout,
        )
    if ns.command == "fix":
        return FixArgs(inputs=_inputs(ns), in_place=ns.in_place)
    if ns.command == "verify-gpu":
        given = [(flag, getattr(ns, env)) for env, flag in PROBE_FLAGS.items()]
        return VerifyArgs(probe_argv=tuple(f"{f}={v}" for f, v in given if v is not None))
    if ns.command == "run":
        return RunArgs(
            tls_cert=ns.tls_cert,
            tls_key=ns.tls_key,
            port=ns.port,
            address=ns.address,
            metrics_port=ns.metrics_port,
            health_port=ns.health_port,
            drift=not ns.no_drift,
            policy_reports=not ns.no_policy_reports,
            log_json=ns.log_json,
            verbose=ns.verbose,
        )
    return WebhookConfigArgs(
        url=ns.url, ca_file=ns.ca_file, failure_policy=ns.failure_policy, timeout=ns.timeout
    )
