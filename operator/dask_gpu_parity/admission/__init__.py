"""The operator beside the dask-kubernetes operator: admission webhooks and the drift watch.

Two layers, one way: :mod:`.runtime` (the server, the API client, informers, the drift watch,
Events, metrics) calls :mod:`.decide` (what to answer, what drifted, where pods run), and
:mod:`.decide` imports no I/O library, no event loop and nothing of :mod:`.runtime`. The
import contracts in ``pyproject.toml`` hold both; the module list is in ``docs/architecture.md``.

Importing this package imports no kopf: ``check`` and ``webhook-config`` use :mod:`.decide`.
"""
