"""The command line's grammar: every subcommand, flag, example and exit code in ``--help``."""

from __future__ import annotations

import argparse
import textwrap
from collections.abc import Callable
from enum import StrEnum
from typing import Any

from dask_gpu_parity import __version__, probe
from dask_gpu_parity.core.policy import Delivery, ExtendedResourceToleration
from dask_gpu_parity.core.verifier import default_probe_image
from dask_gpu_parity.manifests import DEFAULT_EXCLUDES, InputError
from dask_gpu_parity.manifests.report import FORMATS

from .audit_parser import add_audit

__all__ = ["PROBE_FLAGS", "build_parser"]

_CHECK_EXIT = """\
exit codes:
  0  no finding at or above --fail-on (or --exit-zero)
  1  findings at or above --fail-on; files that cannot be read or parsed are
     error findings (DGP900, DGP901), reported with the others, like ruff's E902
  2  the command cannot run: a bad flag, an empty or missing path, an invalid
     --policy or --nodes file, a report that cannot be written"""

_CHECK_EPILOG = f"""\
examples:
  dask-gpu-parity check .
  dask-gpu-parity check manifests/ -o sarif > dask-gpu-parity.sarif
  helm template rel ./chart | dask-gpu-parity check - --stdin-filename chart/rendered.yaml
  dask-gpu-parity check . -o gitlab --exit-zero > gl-code-quality-report.json

{
    textwrap.fill(
        "folders are searched for *.yaml, *.yml and *.json (any case), leaving out "
        + ", ".join(DEFAULT_EXCLUDES)
        + ", what .gitignore files ignore, Helm chart templates/ folders and kustomize "
        "patches (docs/ci.md).",
        78,
    )
}

{_CHECK_EXIT}"""

_FIX_EPILOG = """\
examples:
  dask-gpu-parity fix cluster.yaml > fixed.yaml
  dask-gpu-parity fix --in-place manifests/
  kustomize build overlays/prod | dask-gpu-parity fix - > fixed.yaml

exit codes:
  0  fixed, or nothing to fix (errors left for a hand are listed on stderr)
  2  a bad flag or path, or an input that cannot be read, parsed or written:
     to stdout nothing is written; with --in-place the other files are still
     fixed and each failure is named"""

_VERIFY_EPILOG = """\
examples:
  dask-gpu-parity verify-gpu
  dask-gpu-parity verify-gpu --expect-driver 580.159.04 --expect-cuda 13.0

Each flag overrides the environment variable of the same name (docs/probe.md).
The result is one JSON line on stdout; a failure is also one line on stderr.

exit codes:
  0  every check passed or was skipped
  1  a check failed, or the driver hung past --timeout-s
  2  the probe could not run (a setting it cannot read, an unexpected error)"""

_RUN_EPILOG = """\
examples:
  dask-gpu-parity run --tls-cert /certs/tls.crt --tls-key /certs/tls.key
  KUBECONFIG=~/.kube/dev dask-gpu-parity run --tls-cert c.pem --tls-key k.pem --no-drift

The API server is found as kubectl finds it: in a pod, its service account;
else $KUBECONFIG or ~/.kube/config. It is reached once before the operator
starts, so a missing or wrong configuration is one line, not a traceback.

exit codes:
  0  stopped by a signal after running
  2  no readable certificate, no cluster configuration, an API server that
     cannot be reached, or the 'operator' extra not installed"""

_CONFIG_EPILOG = """\
example:
  dask-gpu-parity webhook-config --url https://10.0.0.5:9443 --ca-file ca.pem | kubectl apply -f -

exit codes:
  0  printed
  2  a bad flag, an --url that is not https://, an unreadable --ca-file"""

# The probe's settings (docs/probe.md), by environment variable; its flags are derived from them
# exactly as probe.py derives its own, so `verify-gpu --expect-driver X` reaches the probe.
_PROBE_HELP = {
    probe.ENV_EXPECT_DRIVER: "the exact NVIDIA driver the workers run, e.g. 580.159.04",
    probe.ENV_EXPECT_CUDA: "CUDA version the image needs, MAJOR.MINOR (default: $CUDA_VERSION)",
    probe.ENV_MIN_COMPUTE_CAPABILITY: "minimum compute capability, MAJOR.MINOR",
    probe.ENV_MIN_FREE_MEMORY_MIB: "free GPU memory needed, in MiB (default: not checked)",
    probe.ENV_TIMEOUT_S: "give up on a hung driver after this many seconds (default 60)",
    probe.ENV_TERMINATION_LOG: "file the one-line result goes to (default /dev/termination-log)",
}
PROBE_FLAGS = {
    env: "--" + env.removeprefix("GPU_PARITY_").lower().replace("_", "-") for env in probe.ENV_VARS
}


class _Parser(argparse.ArgumentParser):
    """argparse that raises instead of exiting, so ``main`` owns every exit."""

    def error(self, message: str) -> Any:
        raise InputError(f"{self.prog}: {message} (see --help)")


def _member(enum: type[StrEnum]) -> Callable[[str], Any]:
    """An argparse ``type``: the enum's member, which the Policy holds and the rules compare.

    An unknown word is handed on as it is, for ``choices`` to name the valid ones.
    """

    def convert(text: str) -> Any:
        try:
            return enum(text)
        except ValueError:
            return text

    return convert


def _command(commands: Any, name: str, summary: str, epilog: str) -> argparse.ArgumentParser:
    sub: argparse.ArgumentParser = commands.add_parser(
        name,
        help=summary,
        description=summary[0].upper() + summary[1:] + ".",
        epilog=epilog,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    return sub


def _inputs(sub: argparse.ArgumentParser) -> None:
    sub.add_argument("paths", nargs="+", metavar="PATH", help="files, folders, or - for stdin")
    sub.add_argument(
        "--policy", metavar="FILE", help="a DaskGPUPolicy manifest (default: built-in)"
    )
    sub.add_argument(
        "--nodes",
        metavar="FILE",
        help="`kubectl get nodes,resourceslices,deviceclasses -o yaml` output (Nodes, and DRA "
        "ResourceSlices and DeviceClasses if any): enables the placement rules",
    )
    sub.add_argument(
        "--device-classes",
        metavar="FILE",
        help="`kubectl get deviceclasses -o yaml` output: DRA DeviceClasses whose extended "
        "resources are GPUs (default: NVIDIA's gpu.nvidia.com and mig.nvidia.com)",
    )
    sub.add_argument(
        "--extended-resource-toleration",
        type=_member(ExtendedResourceToleration),
        choices=[e.value for e in ExtendedResourceToleration],
        help="whether the cluster's ExtendedResourceToleration admission plugin is on "
        "(default: the policy's, else auto: on for GKE, AKS and EKS nodes)",
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
    sub.add_argument(
        "--exclude",
        action="append",
        default=[],
        metavar="PATTERN",
        help="leave out paths matching this gitignore-style pattern (repeatable)",
    )
    sub.add_argument(
        "--no-default-excludes",
        action="store_true",
        help="also read tool folders, Helm templates/ and kustomize patches",
    )
    sub.add_argument(
        "--no-respect-gitignore", action="store_true", help="also read what .gitignore ignores"
    )
    sub.add_argument(
        "--force-exclude",
        action="store_true",
        help="apply the excludes to files named on the command line too (pre-commit)",
    )
    sub.add_argument(
        "--stdin-filename",
        metavar="NAME",
        default="",
        help="the path stdin (-) is reported and excluded as",
    )


def build_parser() -> argparse.ArgumentParser:
    """The ``dask-gpu-parity`` parser and its subcommands."""
    top = _Parser(
        prog="dask-gpu-parity",
        description="Make the Dask scheduler match its GPU workers on Kubernetes.",
        epilog="Run `dask-gpu-parity COMMAND --help` for a command's flags and exit codes.",
    )
    top.add_argument("--version", action="version", version=f"%(prog)s {__version__}")
    commands = top.add_subparsers(dest="command", required=True, parser_class=_Parser)

    check = _command(commands, "check", "report parity findings in manifests", _CHECK_EPILOG)
    _inputs(check)
    check.add_argument(
        "-o", "--output", choices=FORMATS, default="text", help="report format (default: text)"
    )
    check.add_argument(
        "--fail-on",
        choices=("error", "warning"),
        default="error",
        help="lowest severity that makes the exit code 1 (default: error)",
    )
    check.add_argument(
        "--exit-zero", action="store_true", help="exit 0 even with findings (2 stays 2)"
    )

    add_audit(commands)

    fix = _command(commands, "fix", "write manifests with parity fixed", _FIX_EPILOG)
    _inputs(fix)
    fix.add_argument(
        "-i", "--in-place", action="store_true", help="rewrite the files instead of stdout"
    )

    verify = _command(
        commands,
        "verify-gpu",
        "prove this container's GPU (the gpu-parity-check probe)",
        (_VERIFY_EPILOG),
    )
    for env, flag in PROBE_FLAGS.items():
        verify.add_argument(
            flag, dest=env, metavar="VALUE", help=f"{_PROBE_HELP.get(env, 'see docs/probe.md')}"
        )

    run = _command(
        commands, "run", "run the operator: webhooks, node inventory, drift watch", _RUN_EPILOG
    )
    run.add_argument("--tls-cert", required=True, metavar="FILE", help="serving certificate (PEM)")
    run.add_argument("--tls-key", required=True, metavar="FILE", help="its private key (PEM)")
    run.add_argument("--port", type=int, default=9443, help="webhook HTTPS port (default 9443)")
    run.add_argument("--address", default="0.0.0.0", help="address to serve on (default all)")
    run.add_argument(
        "--metrics-port", type=int, default=8080, help="Prometheus /metrics port (default 8080)"
    )
    run.add_argument("--health-port", type=int, default=8081, help="/healthz port (default 8081)")
    run.add_argument(
        "--no-drift",
        action="store_true",
        help="serve webhooks only (run the drift watch in exactly one replica)",
    )
    run.add_argument(
        "--no-policy-reports",
        action="store_true",
        help="the drift watch writes no wgpolicyk8s.io PolicyReports (Events and metrics only)",
    )
    run.add_argument("--log-json", action="store_true", help="JSON log lines")
    run.add_argument("-v", "--verbose", action="store_true", help="debug logging")

    config = _command(
        commands,
        "webhook-config",
        "print webhook configurations for an operator outside the cluster",
        _CONFIG_EPILOG,
    )
    config.add_argument("--url", required=True, help="https://HOST:PORT of `dask-gpu-parity run`")
    config.add_argument("--ca-file", required=True, metavar="FILE", help="CA that signed its cert")
    config.add_argument(
        "--failure-policy",
        choices=("Fail", "Ignore"),
        default="Fail",
        help="what the API server does when the webhook cannot answer (default Fail)",
    )
    config.add_argument("--timeout", type=int, default=5, help="timeoutSeconds, 1-30 (default 5)")
    return top
