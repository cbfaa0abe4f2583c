"""The ``dask-gpu-parity`` command line: ``check``, ``fix``, ``verify-gpu``.

``main(argv)`` returns the exit code and is what tests call. Exit codes: 0 nothing at or above
``--fail-on``; 1 findings at or above it (or a failed GPU check); 2 a usage or input error, with
a one-line message on stderr and no traceback.
"""

from __future__ import annotations

import argparse
import gc
import os
import sys
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, TextIO

import yaml

from . import __version__, probe
from .admission.configurations import WebhookValues, configurations
from .core.engine import Result, evaluate
from .core.findings import Severity
from .core.inventory import Inventory
from .core.plain import as_map
from .core.policy import Delivery, Policy, PolicyError, load, with_verifier
from .core.resources import DaskResource, view
from .core.verifier import default_probe_image
from .manifests import Document, InputError, locate, parse, read, render_fixed, write_in_place
from .manifests.report import FORMATS, Located, render, resource_label, summary

__all__ = ["main"]

EXIT_OK, EXIT_FINDINGS, EXIT_USAGE = 0, 1, 2


class _Parser(argparse.ArgumentParser):
    """argparse that raises instead of exiting, so ``main`` owns every exit."""

    def error(self, message: str) -> Any:
        raise InputError(f"{self.prog}: {message} (see --help)")


def _parser() -> argparse.ArgumentParser:
    parser = _Parser(
        prog="dask-gpu-parity",
        description="Make the Dask scheduler match its GPU workers on Kubernetes.",
    )
    parser.add_argument("--version", action="version", version=f"%(prog)s {__version__}")
    commands = parser.add_subparsers(dest="command", required=True, parser_class=_Parser)

    def inputs(sub: argparse.ArgumentParser) -> None:
        sub.add_argument("paths", nargs="+", metavar="PATH", help="files, folders or - for stdin")
        sub.add_argument("--policy", metavar="FILE", help="a DaskGPUPolicy manifest")
        sub.add_argument(
            "--nodes", metavar="FILE", help="`kubectl get nodes -o yaml` output: placement rules"
        )
        verifier = sub.add_argument_group("verifier (override the policy's spec.verifier)")
        verifier.add_argument(
            "--verifier",
            choices=[d.value for d in Delivery],
            help="reference: copy the probe from the probe image (default); inline: embed it",
        )
        image = verifier.add_mutually_exclusive_group()
        image.add_argument("--probe-image", metavar="REF", help="the probe image, by tag or digest")
        image.add_argument(
            "--probe-registry",
            metavar="HOST[/PATH]",
            help=f"a mirror registry for this release's probe image, {default_probe_image()}",
        )

    check = commands.add_parser("check", help="report parity findings in manifests")
    inputs(check)
    check.add_argument("-o", "--output", choices=FORMATS, default="text", help="report format")
    check.add_argument(
        "--fail-on",
        choices=("error", "warning"),
        default="error",
        help="lowest severity that makes the exit code 1 (default: error)",
    )
    fix = commands.add_parser("fix", help="write manifests with parity fixed")
    inputs(fix)
    fix.add_argument("-i", "--in-place", action="store_true", help="rewrite the files")
    verify = commands.add_parser(
        "verify-gpu", help="prove this container's GPU (the gpu-parity-check probe)"
    )
    verify.add_argument("probe_args", nargs=argparse.REMAINDER, help=argparse.SUPPRESS)
    run = commands.add_parser("run", help="run the operator: webhooks, node inventory, drift watch")
    run.add_argument("--tls-cert", required=True, metavar="FILE", help="serving certificate (PEM)")
    run.add_argument("--tls-key", required=True, metavar="FILE", help="its private key (PEM)")
    run.add_argument("--port", type=int, default=9443, help="webhook HTTPS port (default 9443)")
    run.add_argument("--address", default="0.0.0.0", help="address to serve on")
    run.add_argument("--metrics-port", type=int, default=8080, help="Prometheus /metrics port")
    run.add_argument("--health-port", type=int, default=8081, help="/healthz port")
    run.add_argument(
        "--no-drift",
        action="store_true",
        help="serve webhooks only (run the drift watch in exactly one replica)",
    )
    run.add_argument("--log-json", action="store_true", help="JSON log lines")
    run.add_argument("-v", "--verbose", action="store_true", help="debug logging")
    config = commands.add_parser(
        "webhook-config", help="print webhook configurations for an operator outside the cluster"
    )
    config.add_argument("--url", required=True, help="https://HOST:PORT of `dask-gpu-parity run`")
    config.add_argument("--ca-file", required=True, metavar="FILE", help="CA that signed its cert")
    config.add_argument("--failure-policy", choices=("Fail", "Ignore"), default="Fail")
    config.add_argument("--timeout", type=int, default=5, help="timeoutSeconds (1-30)")
    return parser


@dataclass
class _Checked:
    document: Document
    dask: DaskResource
    result: Result


def _load_policy(args: argparse.Namespace) -> Policy | None:
    policy = None
    if args.policy is not None:
        documents = [d for s in read([args.policy]) for d in parse(s)]
        policies = [d for d in documents if d.data.get("kind") == "DaskGPUPolicy"]
        if len(policies) != 1:
            raise InputError(f"{args.policy}: expected one DaskGPUPolicy, found {len(policies)}")
        try:
            policy = load(policies[0].data)
        except PolicyError as exc:
            raise InputError(f"{args.policy}: invalid DaskGPUPolicy: {exc}") from exc
    if args.verifier is None and args.probe_image is None and args.probe_registry is None:
        return policy
    try:
        return with_verifier(
            policy or Policy(),
            delivery=args.verifier,
            image=args.probe_image,
            registry=args.probe_registry,
        )
    except PolicyError as exc:
        field, _, message = str(exc).partition(": ")
        flag = {
            "spec.verifier.image": "--probe-image",
            "spec.verifier.registry": "--probe-registry",
        }
        raise InputError(f"{flag.get(field, '--verifier')}: {message}") from exc


def _load_inventory(path: str | None) -> Inventory | None:
    if path is None:
        return None
    nodes = [d.data for s in read([path]) for d in parse(s) if d.data.get("kind") == "Node"]
    if not nodes:
        raise InputError(f"{path}: no Node objects (expected `kubectl get nodes -o yaml` output)")
    return Inventory.from_nodes(nodes)


def _evaluate_all(
    documents: list[Document], policy: Policy | None, inventory: Inventory | None
) -> list[_Checked]:
    dask_documents = [(doc, dask) for doc in documents if (dask := view(doc.data)) is not None]
    clusters = {
        (dask.namespace, dask.name): doc.data
        for doc, dask in dask_documents
        if dask.kind == "DaskCluster"
    }
    checked = []
    for doc, dask in dask_documents:
        cluster = None
        if dask.kind == "DaskWorkerGroup":
            name = as_map(doc.data.get("spec")).get("cluster")
            cluster = clusters.get((dask.namespace, name)) if isinstance(name, str) else None
        result = evaluate(doc.data, policy, inventory, cluster=cluster)
        checked.append(_Checked(doc, dask, result))
    return checked


def _check(args: argparse.Namespace, out: TextIO) -> int:
    policy, inventory = _load_policy(args), _load_inventory(args.nodes)
    sources = read(args.paths)
    documents = [d for s in sources for d in parse(s)]
    checked = _evaluate_all(documents, policy, inventory)
    items = [
        Located(
            finding,
            c.dask.kind,
            c.dask.name,
            c.dask.namespace,
            c.document.source.display,
            c.document.index + 1,
            locate(c.document, finding.path),
        )
        for c in checked
        for finding in c.result.findings
    ]
    counts = summary(items, len(checked), len(documents), len(sources))
    labels = [
        (c.document.source.display, resource_label(c.dask.kind, c.dask.namespace, c.dask.name))
        for c in checked
    ]
    out.write(render(args.output, items, counts, labels))
    threshold = Severity.parse(args.fail_on)
    return EXIT_FINDINGS if any(i.finding.severity >= threshold for i in items) else EXIT_OK


def _fix(args: argparse.Namespace, out: TextIO, err: TextIO) -> int:
    if args.in_place and "-" in args.paths:
        raise InputError("fix: --in-place cannot rewrite stdin; drop - or --in-place")
    policy, inventory = _load_policy(args), _load_inventory(args.nodes)
    sources = read(args.paths)
    parsed = [(source, parse(source)) for source in sources]
    checked = _evaluate_all([d for _, docs in parsed for d in docs], policy, inventory)
    by_source: dict[int, dict[int, list[tuple[str, list[Any]]]]] = {}
    for c in checked:
        patch = c.result.patch
        if patch:
            entry = by_source.setdefault(id(c.document.source), {})
            entry.setdefault(c.document.index, []).append((c.document.prefix, patch))
    remaining = 0
    for c in checked:
        remaining += sum(not f.fixable and f.severity is Severity.ERROR for f in c.result.findings)
    changed = 0
    for source, _ in parsed:
        text = render_fixed(source, by_source.get(id(source), {}))
        if args.in_place:
            if text != source.text:
                write_in_place(source.name, text)
                changed += 1
        else:
            out.write(text if text.endswith("\n") or not text else text + "\n")
    if args.in_place:
        err.write(f"fixed {changed} file(s)\n")
    if remaining:
        err.write(f"{remaining} error(s) need a change by hand: run dask-gpu-parity check\n")
    return EXIT_OK


def _run(args: argparse.Namespace) -> int:
    for path in (args.tls_cert, args.tls_key):
        if not os.access(path, os.R_OK):
            raise InputError(f"run: cannot read {path}: mount the webhook certificate there")
    try:
        from .admission import handlers  # noqa: PLC0415  # kopf only when running the operator
    except ImportError as exc:
        raise InputError(
            f"run: the operator needs the 'operator' extra ({exc.name} is missing): "
            "pip install 'dask-gpu-parity[operator]'"
        ) from exc
    handlers.run(
        handlers.Options(
            certfile=args.tls_cert,
            keyfile=args.tls_key,
            port=args.port,
            addr=args.address,
            metrics_port=args.metrics_port,
            health_port=args.health_port,
            drift=not args.no_drift,
        ),
        json_logs=args.log_json,
        verbose=args.verbose,
    )
    return EXIT_OK


def _webhook_config(args: argparse.Namespace, out: TextIO) -> int:
    if not args.url.startswith("https://"):
        raise InputError(
            "webhook-config: --url must start with https:// (the API server needs TLS)"
        )
    if not 1 <= args.timeout <= 30:
        raise InputError("webhook-config: --timeout must be between 1 and 30 seconds")
    try:
        with open(args.ca_file, "rb") as handle:
            ca = handle.read()
    except OSError as exc:
        raise InputError(f"webhook-config: cannot read {args.ca_file}: {exc.strerror}") from exc
    values = WebhookValues(
        ca_bundle=ca,
        url=args.url,
        failure_policy=args.failure_policy,
        timeout_seconds=args.timeout,
    )
    out.write(yaml.safe_dump_all(configurations(values), sort_keys=False))
    return EXIT_OK


def main(
    argv: Sequence[str] | None = None, *, out: TextIO | None = None, err: TextIO | None = None
) -> int:
    """Run the command line; return the exit code."""
    out, err = out or sys.stdout, err or sys.stderr
    try:
        args = _parser().parse_args(argv)
        if args.command == "verify-gpu":
            return probe.main(list(args.probe_args))
        if args.command in ("check", "fix"):
            # Manifests are acyclic dicts and lists that reference counting frees; the cyclic
            # collector would only re-scan every parsed document, again and again, as input grows.
            gc.disable()
        if args.command == "check":
            return _check(args, out)
        if args.command == "run":
            return _run(args)
        if args.command == "webhook-config":
            return _webhook_config(args, out)
        return _fix(args, out, err)
    except InputError as exc:
        err.write(f"error: {exc}\n")
        return EXIT_USAGE
    except KeyboardInterrupt:
        err.write("interrupted\n")
        return 130
    except BrokenPipeError:
        return EXIT_OK
    finally:
        gc.enable()


if __name__ == "__main__":
    sys.exit(main())
