"""Fields the API server always fills in, typed as present.

The Kubernetes client's models mark ``metadata``, ``spec``, ``status`` and ``metadata.name``
optional, since a client may build an object without them; an object read back from the API
server has them all. These helpers say so once, and fail with one clear line if it ever does not.
"""

from __future__ import annotations

from typing import Any, Protocol, TypeVar

from kubernetes import client

__all__ = ["as_dict", "name_of", "present"]

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
