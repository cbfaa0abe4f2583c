"""Make the Dask scheduler match its GPU workers on Kubernetes."""

import os
import sys


def _installed_version() -> str:
    """The installed distribution's version; pyproject.toml is the one source.

    Read from the first ``dask_gpu_parity-*.dist-info/METADATA`` on ``sys.path``, where
    ``importlib.metadata`` finds it for a wheel or an editable install; importing
    ``importlib.metadata`` itself (email, zipfile, …) took longer than the rest of
    ``check``'s start-up. Any other layout asks ``importlib.metadata``.
    """
    for folder in sys.path:
        try:
            names = os.listdir(folder or ".")
        except OSError:
            continue
        for name in names:
            if name.startswith("dask_gpu_parity-") and name.endswith(".dist-info"):
                try:
                    with open(os.path.join(folder, name, "METADATA"), encoding="utf-8") as meta:
                        for line in meta:
                            if line.startswith("Version: "):
                                return line[len("Version: ") :].strip()
                            if not line.strip():
                                break  # the headers end: no version there
                except OSError:
                    pass
                return _metadata_version()
    return _metadata_version()


def _metadata_version() -> str:
    from importlib.metadata import PackageNotFoundError, version  # noqa: PLC0415 - slow import

    try:
        return version("dask-gpu-parity")
    except PackageNotFoundError:  # run from a source tree that was never installed
        return "0+unknown"


__version__ = _installed_version()
