"""The ``dask-gpu-parity`` command line: ``check``, ``fix``, ``audit``, ``verify-gpu``, ``run``.

``main(argv)`` returns the exit code and is what tests call; it is the one place that turns
errors into exit codes. ``check``: 0 nothing at or above ``--fail-on``; 1 findings at or above
it (files that cannot be read or parsed are error findings); 2 the command cannot run (usage
errors, an invalid ``--policy``, a report that cannot be written), with one line on stderr and
no traceback. ``fix``: 0, or 2 for an input it could not read or write.
"""

from __future__ import annotations

import contextlib
import gc
import os
import signal
import sys
from collections.abc import Sequence
from typing import TextIO

from dask_gpu_parity import probe
from dask_gpu_parity.manifests import InputError
from dask_gpu_parity.manifests.report import printable
from dask_gpu_parity.manifests.signals import Signalled, signals_raise

from .args import Arguments, AuditArgs, CheckArgs, FixArgs, RunArgs, VerifyArgs, parse_args
from .check import check

__all__ = ["EXIT_FINDINGS", "EXIT_OK", "EXIT_USAGE", "main"]

EXIT_OK, EXIT_FINDINGS, EXIT_USAGE = 0, 1, 2


def _dispatch(args: Arguments, out: TextIO, err: TextIO) -> int:
    if isinstance(args, VerifyArgs):  # the probe, each flag given passed on as its own
        return probe.main(list(args.probe_argv))
    # `fix` (ruamel.yaml), `audit` and the operator's commands are imported when run, not for
    # `check`.
    if isinstance(args, RunArgs):
        from .operator import run  # noqa: PLC0415 - deferred on purpose (start-up of `check`)

        return run(args)
    if isinstance(args, AuditArgs):
        from .audit import run_audit  # noqa: PLC0415 - deferred on purpose (start-up of `check`)

        return run_audit(args, out, err)
    if not isinstance(args, CheckArgs | FixArgs):
        from .operator import webhook_config  # noqa: PLC0415 - deferred on purpose

        return webhook_config(args, out)
    # Manifests are acyclic dicts and lists that reference counting frees; the cyclic
    # collector would only re-scan every parsed document, again and again, as input grows.
    gc.disable()
    if isinstance(args, CheckArgs):
        report, code = check(args, err)
        out.write(report)
        out.flush()
        return code
    from .fix import fix  # noqa: PLC0415 - deferred on purpose (start-up of `check`)

    with signals_raise():  # a terminated fix --in-place leaves no temporary file behind
        return fix(args, out, err)


def main(
    argv: Sequence[str] | None = None, *, out: TextIO | None = None, err: TextIO | None = None
) -> int:
    """Run the command line; return the exit code."""
    out, err = out or sys.stdout, err or sys.stderr
    try:
        return _dispatch(parse_args(argv), out, err)
    except InputError as exc:
        err.write(printable(f"error: {exc}") + "\n")
        return EXIT_USAGE
    except KeyboardInterrupt:
        err.write("interrupted\n")
        return 130
    except Signalled as exc:
        err.write(f"stopped by signal {signal.Signals(exc.signum).name}\n")
        return 128 + exc.signum
    except OSError as exc:  # writing the report: a closed pipe, a full disk
        err.write(printable(f"error: cannot write the output: {exc.strerror or exc}") + "\n")
        if out is sys.stdout:  # the interpreter's last flush would fail on it again
            with contextlib.suppress(OSError):
                os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return EXIT_USAGE
    finally:
        gc.enable()
