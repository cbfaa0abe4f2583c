"""Admission and the drift watch: the operator that runs beside the dask-kubernetes operator.

Pure first: ``decisions`` (what to answer), ``reviews`` (AdmissionReviews), ``configurations``
(the webhook configurations) and ``drift`` (a scheduler Deployment against parity) import no
I/O library. Then the wiring: ``state`` (the one owner of the running operator's state),
``server`` (the HTTPS webhook server), ``handlers`` (kopf: indices, the drift watch, ``run``),
``kube`` (the Kubernetes client) and ``metrics`` (Prometheus).

Importing this package imports no kopf: ``check`` and ``webhook-config`` use its pure modules.
"""
