"""The operator's runtime: everything that waits, reads or writes.

The one API client (``apiserver``) and its connection (``kube``), list-then-watch
(``informer``), the operator's state (``state``), the drift watch (``driftstore``,
``driftcheck``, ``driftwatch``), ``events``, the HTTPS webhook server (``server``, ``tls``),
kopf's ``handlers`` and ``metrics``. It asks :mod:`dask_gpu_parity.admission.decide` what to do.
"""
