"""Make the Dask scheduler match its GPU workers on Kubernetes."""

__version__ = "0.1.0"
