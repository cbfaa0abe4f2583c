"""The pure core: everything that decides parity, over plain data.

No kopf, no Kubernetes client, no NVML, no files, no network (the layering lint in
``pyproject.toml`` fails otherwise). ``engine.evaluate`` is the one entry point; ``view`` reads
a Dask resource once for the ``rules``; ``inventory`` and ``labels`` match pods to GPU nodes;
``policy`` is what a DaskGPUPolicy says; ``verifier`` builds the init container.
"""
