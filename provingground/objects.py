"""Fields the API server always fills in, typed as present.

The Kubernetes client's models mark ``metadata``, ``spec``, ``status`` and ``metadata.name``
optional, since a client may build an object without them; an object read back from the API
server has them all. These helpers say so once, and fail with one clear line if it ever does not.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from concurrent.futures import ThreadPoolExecutor
from typing import Any, Protocol, TypeVar

from kubernetes import client
from kubernetes.client.exceptions import ApiException

__all__ = ["as_dict", "create_all", "name_of", "present"]

T = TypeVar("T")


class _Named(Protocol):
    @property
    def metadata(self) -> client.V1ObjectMeta | None: ...


def present(value: T | None, what: str) -> T:
    """``value``, which the API server always returns; ``what`` names it in the error."""
    if value is None:
        raise RuntimeError(f"The API server returned no {what}: is it a Kubernetes API server?")
    return value


def name_of(obj: _Named) -> str:
    """The ``metadata.name`` of an object read from the API server."""
    name: str = present(present(obj.metadata, "metadata").name, "metadata.name")
    return name


def as_dict(value: object, what: str) -> dict[str, Any]:
    """A custom object as the client returns it (decoded JSON, typed ``object`` by the client)."""
    if not isinstance(value, dict):
        raise RuntimeError(
            f"The API server returned {type(value).__name__} for {what}, not an object"
        )
    return value


def create_all(
    create: Callable[[dict[str, Any]], object],
    bodies: Iterable[Mapping[str, Any]],
    concurrency: int,
    kind: str | None = None,
) -> int:
    """``create`` each body concurrently; one that exists already is left alone.

    Args:
        create: the client call that creates one object from its body.
        bodies: the objects.
        concurrency: how many calls at once.
        kind: the kind named in an error; ``None``: each body's ``kind``.

    Returns:
        How many were created.

    Raises:
        RuntimeError: a call failed other than with 409 Conflict.
    """

    def one(body: Mapping[str, Any]) -> int:
        try:
            create(dict(body))
        except ApiException as exc:
            if exc.status == 409:
                return 0
            raise RuntimeError(
                f"Creating {kind or body['kind']} {body['metadata']['name']} failed: "
                f"{exc.status} {exc.reason}: {exc.body}"
            ) from exc
        return 1

    with ThreadPoolExecutor(max_workers=concurrency) as pool:
        return sum(pool.map(one, bodies))
