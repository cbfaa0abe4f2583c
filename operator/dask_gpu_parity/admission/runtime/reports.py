"""The drift watch's PolicyReports: one ``wgpolicyk8s.io`` report per GPU DaskCluster, kept current.

After each check of a cluster the drift watch says what its report should say
(:meth:`PolicyReports.update`) or that it should have none (:meth:`PolicyReports.remove`: the
cluster is gone, opted out, or its workers ask for no GPU). The writes happen here, in the
background, so checks never wait for the API server:

- one wanted state per cluster is kept, so a cluster that changes ten times before its turn is
  written once: what waits is bounded by the number of clusters;
- a report is sent (server-side apply) only when what its results say changed: its annotation
  carries a digest of the results, read back at start by one paginated LIST of our reports, so
  a restarted operator does not rewrite ten thousand unchanged reports;
- writes go at most ``RATE`` a second after a burst of ``BURST``, as Events do;
- each report is owned by its DaskCluster, so the garbage collector removes it with the cluster
  even while the operator is down; after the first pass, reports of clusters the watch no
  longer reports on (opted out or made CPU-only meanwhile) are deleted.

Where ``wgpolicyk8s.io/v1alpha2`` is not served (the CRD is not installed: docs/operator.md,
"PolicyReports") nothing is written and the log says so once; discovery is asked again every
``REDISCOVER_SECONDS``, so a CRD installed later is picked up without a restart.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections import deque
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from dask_gpu_parity.core.plain import as_map
from dask_gpu_parity.core.policyreport import (
    API_VERSION,
    DIGEST_ANNOTATION,
    MANAGED_BY,
    PLURAL,
    POLICY,
    Outcome,
    Subject,
    digest,
    policy_report,
    report_name,
)

from .apiserver import ApiClient, ApiError, NotFound, Unreachable
from .events import TokenBucket

__all__ = ["BURST", "RATE", "PolicyReports", "ReportCounts"]

log = logging.getLogger("dask_gpu_parity")

RATE, BURST = 20.0, 50  # report writes a second, and how many may go at once
REDISCOVER_SECONDS = 60.0  # while the CRD is not installed, discovery is asked again this often
RETRY_SECONDS = 10.0  # a write the API server did not answer is tried again this much later
PAGE = 500
_LOGGED = 10  # failed writes logged one by one; then every 1,000th
_API = f"/apis/{API_VERSION}"
Key = tuple[str, str]  # (namespace, DaskCluster name)
Wanted = tuple[Subject, tuple[Outcome, ...]] | None  # None: no report


@dataclass(frozen=True, slots=True)
class ReportCounts:
    """What became of the PolicyReports so far (``dgp_policyreports*``)."""

    served: bool = False  # wgpolicyk8s.io/v1alpha2 is served
    reports: int = 0  # reports of ours the API server holds, as far as known
    written: int = 0
    deleted: int = 0
    failed: int = 0
    pending: int = 0


@dataclass(frozen=True, slots=True)
class _Stored:
    name: str
    digest: str


class PolicyReports:
    """Keep one PolicyReport per reported DaskCluster; :meth:`run` writes until cancelled."""

    def __init__(
        self,
        api: ApiClient,
        *,
        rate: float = RATE,
        burst: int = BURST,
        clock: Callable[[], float] = time.time,
    ) -> None:
        self.api = api
        self._bucket = TokenBucket(rate, burst)
        self._clock = clock
        self._stored: dict[Key, _Stored] = {}
        self._wanted: dict[Key, Wanted] = {}
        self._queue: deque[Key] = deque()
        self._wake = asyncio.Event()
        self._reported: set[Key] = set()  # keys with a report wanted now
        self._first_pass = asyncio.Event()
        self._read = False  # our reports on the API server have been read back
        self.served = False
        self.written = self.deleted = self.failed = 0

    # -- what the drift watch says -----------------------------------------------------------

    def update(self, subject: Subject, outcomes: Sequence[Outcome]) -> None:
        """The cluster's report should say ``outcomes``."""
        key = (subject.namespace, subject.name)
        self._reported.add(key)
        wanted = (subject, tuple(outcomes))
        stored = self._stored.get(key)
        if key not in self._wanted and stored == _Stored(report_name(subject), digest(wanted[1])):
            return
        self._want(key, wanted)

    def remove(self, key: Key) -> None:
        """The cluster should have no report (gone, opted out, or no GPU workers)."""
        self._reported.discard(key)
        if key in self._stored or key in self._wanted or not self._read:
            # Before the read-back a report may be there that is not known yet: the removal
            # waits in the queue and, once read back, deletes it if found.
            self._want(key, None)

    def first_pass_done(self) -> None:
        """Every cluster has been checked once: reports of any other cluster may go."""
        self._first_pass.set()

    def counts(self) -> ReportCounts:
        """What became of the reports so far."""
        return ReportCounts(
            self.served,
            len(self._stored),
            self.written,
            self.deleted,
            self.failed,
            len(self._wanted),
        )

    def _want(self, key: Key, wanted: Wanted) -> None:
        if key not in self._wanted:
            self._queue.append(key)
        self._wanted[key] = wanted
        self._wake.set()

    # -- writing -----------------------------------------------------------------------------

    async def run(self) -> None:
        """Find the API, read back our reports, then write what is wanted, until cancelled."""
        while not await self._discover():
            await asyncio.sleep(REDISCOVER_SECONDS)
        await self._read_back()
        sweep = asyncio.create_task(self._sweep(), name="policyreports sweep")
        try:
            while True:
                await self._wake.wait()
                self._wake.clear()
                while self._queue:
                    key = self._queue.popleft()
                    if key in self._wanted:
                        await self._write(key, self._wanted.pop(key))
        finally:
            sweep.cancel()

    async def _discover(self) -> bool:
        try:
            found = await self.api.get(_API)
        except NotFound:
            found = {}
        except ApiError as exc:
            log.warning(f"Discovery of {_API} failed: {exc}; PolicyReports wait for it")
            return False
        names = {str(as_map(r).get("name")) for r in found.get("resources") or []}
        self.served = PLURAL in names
        log.info(
            f"PolicyReports: {API_VERSION} is served; one report per GPU DaskCluster"
            if self.served
            else f"PolicyReports: {API_VERSION} is not served (the PolicyReport CRD is not "
            "installed); verdicts go to Events and metrics only, discovery is asked again "
            f"every {REDISCOVER_SECONDS:.0f} s"
        )
        return self.served

    async def _read_back(self) -> None:
        """Our reports on the API server, by the cluster they are about (one paginated LIST)."""
        selector = ",".join(f"{k}={v}" for k, v in MANAGED_BY.items())
        token = ""
        while True:
            params = {"labelSelector": selector, "limit": str(PAGE)}
            if token:
                params["continue"] = token
            try:
                page = await self.api.get(f"{_API}/{PLURAL}", params)
            except ApiError as exc:
                log.warning(f"Listing PolicyReports failed: {exc}; every report is written anew")
                break
            for item in page.get("items") or []:
                meta, scope = as_map(item.get("metadata")), as_map(item.get("scope"))
                key = (str(meta.get("namespace", "")), str(scope.get("name", "")))
                found = str(as_map(meta.get("annotations")).get(DIGEST_ANNOTATION, ""))
                self._stored[key] = _Stored(str(meta.get("name", "")), found)
            token = str(as_map(page.get("metadata")).get("continue") or "")
            if not token:
                break
        self._read = True

    async def _sweep(self) -> None:
        """After the first pass: delete the reports of clusters with none wanted."""
        await self._first_pass.wait()
        for key in [k for k in self._stored if k not in self._reported]:
            self.remove(key)
        self._wake.set()

    async def _write(self, key: Key, wanted: Wanted) -> None:
        stored = self._stored.get(key)
        name = report_name(wanted[0]) if wanted is not None else None
        if stored is not None and stored.name != name:
            # Forgotten before the call: an update that arrives while it is in flight must not
            # take the report for there (it is being deleted) and skip its write.
            del self._stored[key]
            if not await self._send_delete(key, stored.name, wanted):
                self._stored.setdefault(key, stored)  # still there, as far as known
                return
        if wanted is None:
            return
        subject, outcomes = wanted
        found = digest(outcomes)
        if stored == _Stored(str(name), found):
            return  # read back unchanged after a restart
        report = policy_report(subject, outcomes, int(self._clock()))
        path = f"{_API}/namespaces/{key[0]}/{PLURAL}/{name}"
        await self._bucket.take()
        try:
            await self.api.apply(path, report, field_manager=POLICY)
        except ApiError as exc:
            self._failed(key, wanted, f"Writing PolicyReport {key[0]}/{name}", exc)
            return
        self.written += 1
        self._stored[key] = _Stored(str(name), found)

    async def _send_delete(self, key: Key, name: str, wanted: Wanted) -> bool:
        await self._bucket.take()
        try:
            await self.api.delete(f"{_API}/namespaces/{key[0]}/{PLURAL}/{name}")
        except NotFound:
            pass  # the garbage collector was first
        except ApiError as exc:
            self._failed(key, wanted, f"Deleting PolicyReport {key[0]}/{name}", exc)
            return False
        self.deleted += 1
        return True

    def _failed(self, key: Key, wanted: Wanted, what: str, exc: ApiError) -> None:
        self.failed += 1
        if self.failed <= _LOGGED or not self.failed % 1000:  # RBAC or a CRD gone: not 10,000 lines
            log.warning(f"{what} failed: {exc} ({self.failed} failed writes so far)")
        if isinstance(exc, Unreachable) or exc.status == 429 or exc.status >= 500:
            loop = asyncio.get_running_loop()
            loop.call_later(RETRY_SECONDS, self._retry, key, wanted)

    def _retry(self, key: Key, wanted: Wanted) -> None:
        if key not in self._wanted:  # a newer wanted state replaces this one
            self._want(key, wanted)
