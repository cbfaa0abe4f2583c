"""Admission and the drift watch: the operator that runs beside the dask-kubernetes operator.

Pure first: ``decisions`` (what to answer), ``reviews`` (AdmissionReviews), ``configurations``
(the webhook configurations), ``drift`` (a scheduler Deployment against parity), ``placement``
(where the pods run, by driver class; its repair pins as admission does) and ``nodeindex``
(node events into the core inventory's shapes, snapshots out) import no I/O library. Then the
wiring: ``state`` (the one owner of the running operator's state), ``apiserver`` (the one API
client, aiohttp: reads, patches, lists, watches, Events) and ``kube`` (its connection),
``informer`` (list-then-watch), the drift watch (``driftstore``: its stores, ``driftcheck``: its
checks, ``driftwatch``: the two composed, and the marks), ``events``, ``server`` (the HTTPS
webhook server), ``handlers`` (kopf: settings, ``run``) and ``metrics`` (Prometheus and
``/readyz``).

Importing this package imports no kopf: ``check`` and ``webhook-config`` use its pure modules.
"""
