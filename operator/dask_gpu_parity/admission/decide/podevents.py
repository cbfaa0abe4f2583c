"""Why a scheduler's GPU check failed, as an Event: the pure part.

kubelet keeps the ``gpu-parity-check`` init container's termination message (the probe's one
line, from ``/dev/termination-log``) in the pod's status, where ``kubectl describe pod`` shows it
under Last State; its own Events say only ``BackOff … restarting failed container``. Event
exporters and alerts never see the reason. The drift watch reads the Dask pods anyway; this
module finds, in a scheduler pod's status, the latest failed run of the init container and words
the Event that carries its reason.

One failure is one run of the container, named by the pod's uid, the run's ``containerID``,
``finishedAt`` and exit code. kubelet reports a run first as ``state.terminated`` (restart count
n) and, once it restarts the container, as ``lastState.terminated`` (restart count n+1): the
restart count is therefore not part of the name, or every failure would be posted twice. The
Event's name derives from it too, so a second post of the same failure (after the operator
restarts) is refused by the API server as AlreadyExists instead of adding a duplicate.
"""

from __future__ import annotations

import datetime as dt
import hashlib
import unicodedata
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from dask_gpu_parity.core.plain import as_list, as_map
from dask_gpu_parity.names import (
    CLUSTER_NAME_LABEL,
    COMPONENT_LABEL,
    DASK_API_VERSION,
    VERIFIER_CONTAINER,
)

__all__ = [
    "FIELD_PATH",
    "HORIZON",
    "MESSAGE_LIMIT",
    "REASON",
    "Notice",
    "ProbeFailure",
    "Seen",
    "escape",
    "event_name",
    "failure",
    "notices",
    "recent",
]

REASON = "GPUParityCheckFailed"
FIELD_PATH = f"spec.initContainers{{{VERIFIER_CONTAINER}}}"  # as kubelet names the container
MESSAGE_LIMIT = 1024  # the EventPoster's limit: the message is cut to fit before it gets there
# The API server's default --event-ttl: a failure older than this may have had its Event
# already, which has expired since; it is history, not news (a crash-looping init container
# fails again within kubelet's 5-minute back-off).
HORIZON = dt.timedelta(hours=1)
_NAME_LIMIT = 253  # an Event's name is a DNS subdomain
_ESCAPES = {"\n": "\\n", "\r": "\\r", "\t": "\\t"}
_WHAT = {1: "failed its GPU check", 2: "could not run the GPU probe"}  # the probe's exit codes


@dataclass(frozen=True)
class ProbeFailure:
    """One failed run of a scheduler pod's ``gpu-parity-check`` init container."""

    namespace: str
    pod: str
    uid: str
    cluster: str
    exit_code: int
    restarts: int  # the container's restart count when the failure was seen
    reason: str  # kubelet's: Error, OOMKilled, ContainerCannotRun ...
    message: str  # the termination message, as kubelet reported it
    finished_at: str
    container_id: str

    @property
    def id(self) -> str:
        """What names this failure (and its Events): the same for every report of the run."""
        return _digest(self.uid, self.container_id, self.finished_at, str(self.exit_code))

    def text(self, *, limit: int = MESSAGE_LIMIT) -> str:
        """The Event's message on the pod: what failed, then the reason, within ``limit``."""
        what = _WHAT.get(self.exit_code, f"exited with code {self.exit_code}")
        if self.exit_code in _WHAT:
            code = f"exit code {self.exit_code}"
        else:
            code = self.reason if self.reason not in ("", "Error") else ""
        details = ", ".join(x for x in (code, f"restart count {self.restarts}") if x)
        head = f"Init container {VERIFIER_CONTAINER} {what} ({details}): "
        body = self.message.strip() or (
            f"no termination message; see kubectl logs {self.pod} -c {VERIFIER_CONTAINER} "
            "--previous"
        )
        return head + escape(body, max(limit - len(head), 0))

    def cluster_text(self, *, limit: int = MESSAGE_LIMIT) -> str:
        """The Event's message on the DaskCluster: the same, naming the pod."""
        head = f"Scheduler pod {escape(self.pod, _NAME_LIMIT)}: "
        text = self.text(limit=max(limit - len(head), 0))
        return head + text[:1].lower() + text[1:]

    def finished(self) -> dt.datetime | None:
        """When the run ended (``None`` when kubelet's timestamp is absent or unreadable)."""
        try:
            when = dt.datetime.fromisoformat(self.finished_at)
        except ValueError:
            return None
        return when if when.tzinfo is not None else when.replace(tzinfo=dt.UTC)


@dataclass(frozen=True)
class Notice:
    """An Event to post: on what, why, what it says, and its deterministic name."""

    ref: Mapping[str, Any]  # apiVersion, kind, metadata (namespace, name, uid)
    field_path: str | None
    reason: str
    message: str
    name: str


def failure(pod: Mapping[str, Any]) -> ProbeFailure | None:
    """The latest failed run of a scheduler pod's ``gpu-parity-check``, if any.

    ``state.terminated`` is the newest run; ``lastState.terminated`` the one before. A run that
    exited 0 is not a failure; when the newest passed, an earlier failure is still reported
    (it happened, and said why).
    """
    meta = as_map(pod.get("metadata"))
    labels = as_map(meta.get("labels"))
    if labels.get(COMPONENT_LABEL) != "scheduler":
        return None
    for item in as_list(as_map(pod.get("status")).get("initContainerStatuses")):
        status = as_map(item)
        if status.get("name") != VERIFIER_CONTAINER:
            continue
        for state in (status.get("state"), status.get("lastState")):
            ended = as_map(as_map(state).get("terminated"))
            code = ended.get("exitCode")
            if isinstance(code, int) and not isinstance(code, bool) and code != 0:
                restarts = status.get("restartCount")
                return ProbeFailure(
                    namespace=str(meta.get("namespace", "")),
                    pod=str(meta.get("name", "")),
                    uid=str(meta.get("uid", "")),
                    cluster=str(labels.get(CLUSTER_NAME_LABEL, "")),
                    exit_code=code,
                    restarts=restarts if isinstance(restarts, int) else 0,
                    reason=str(ended.get("reason") or ""),
                    message=str(ended.get("message") or ""),
                    finished_at=str(ended.get("finishedAt") or ""),
                    container_id=str(ended.get("containerID") or ""),
                )
    return None


def recent(found: ProbeFailure, now: dt.datetime, horizon: dt.timedelta = HORIZON) -> bool:
    """Whether the failure ended within ``horizon`` of ``now`` (or when is unknown)."""
    finished = found.finished()
    return finished is None or now - finished <= horizon


def notices(found: ProbeFailure, cluster_uid: str | None) -> list[Notice]:
    """The Events for a failure: on the pod, and on its DaskCluster when its uid is known."""
    meta = {"namespace": found.namespace, "name": found.pod, "uid": found.uid}
    out = [
        Notice(
            {"apiVersion": "v1", "kind": "Pod", "metadata": meta},
            FIELD_PATH,
            REASON,
            found.text(),
            _event_name(found.pod, found.id),
        )
    ]
    if cluster_uid and found.cluster:
        meta = {"namespace": found.namespace, "name": found.cluster, "uid": cluster_uid}
        out.append(
            Notice(
                {"apiVersion": DASK_API_VERSION, "kind": "DaskCluster", "metadata": meta},
                None,
                REASON,
                found.cluster_text(),
                _event_name(found.cluster, _digest("DaskCluster", found.id)),
            )
        )
    return out


class Seen:
    """The last failure acted on per pod (``namespace/name``): each failure once per process.

    One short string per pod whose check has failed; pods that never failed cost nothing.
    """

    def __init__(self) -> None:
        self._last: dict[str, str] = {}

    def new(self, pod: str, found: ProbeFailure) -> bool:
        """Whether ``found`` is news for ``pod`` (and remember it)."""
        if self._last.get(pod) == found.id:
            return False
        self._last[pod] = found.id
        return True

    def forget(self, pod: str) -> None:
        """The pod is gone."""
        self._last.pop(pod, None)

    def __len__(self) -> int:
        return len(self._last)


def escape(text: str, limit: int) -> str:
    """``text`` with control and format characters escaped, cut to ``limit`` ending in ``...``.

    A termination message is whatever the container wrote: newlines, ANSI escapes and
    bidirectional overrides would break one-line Event views or mislead a terminal. An escape
    sequence is never cut in half.
    """
    out: list[str] = []
    size = 0
    for char in text:
        piece = _ESCAPES.get(char) or _escaped(char)
        if size + len(piece) > limit:
            while out and size + 3 > limit:
                size -= len(out.pop())
            return "".join(out) + "..." if limit >= 3 else ""
        out.append(piece)
        size += len(piece)
    return "".join(out)


def _escaped(char: str) -> str:
    if unicodedata.category(char) not in ("Cc", "Cf", "Cs", "Zl", "Zp"):
        return char
    code = ord(char)
    if code < 0x100:
        return f"\\x{code:02x}"
    return f"\\u{code:04x}" if code < 0x10000 else f"\\U{code:08x}"


def _digest(*parts: str) -> str:
    return hashlib.sha256("\0".join(parts).encode(errors="surrogatepass")).hexdigest()[:16]


def event_name(obj: str, *parts: str) -> str:
    """A deterministic Event name for ``obj`` and what the Event is about (``parts``).

    Posting the same Event again (a restarted operator) meets 409 AlreadyExists instead of
    making a second one.
    """
    return _event_name(obj, _digest(*parts))


def _event_name(obj: str, suffix: str) -> str:
    """``<object>.<suffix>``, as kubelet names its Events; a valid DNS subdomain."""
    return f"{obj[: _NAME_LIMIT - len(suffix) - 1].rstrip('.-')}.{suffix}"
