"""Make the Dask scheduler match its GPU workers on Kubernetes."""

from importlib.metadata import PackageNotFoundError, version

try:
    __version__ = version("dask-gpu-parity")  # pyproject.toml is the one source
except PackageNotFoundError:  # run from a source tree that was never installed
    __version__ = "0+unknown"
