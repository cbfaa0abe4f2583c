"""What the operator keeps of namespaces and DaskGPUPolicies, fed by their informers' sinks."""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping
from typing import Any

from dask_gpu_parity.core.plain import as_map
from dask_gpu_parity.core.policy import Policy, PolicyError
from dask_gpu_parity.core.policy_manifest import load
from dask_gpu_parity.names import SKIP_ANNOTATION

from .informer import object_key

__all__ = ["Namespaces", "Policies"]

log = logging.getLogger("dask_gpu_parity")


class Namespaces:
    """Labels of every namespace, and whether it opted out; ``changed`` is told which changed."""

    def __init__(self, changed: Callable[[str], None]) -> None:
        self.changed = changed
        self.items: dict[str, tuple[dict[str, str], bool]] = {}

    def upsert(self, obj: Mapping[str, Any]) -> None:
        """A namespace was listed, added or changed."""
        meta = as_map(obj.get("metadata"))
        labels = {str(k): str(v) for k, v in as_map(meta.get("labels")).items()}
        flag = as_map(meta.get("annotations")).get(SKIP_ANNOTATION, labels.get(SKIP_ANNOTATION))
        entry = (labels, str(flag).lower() == "true")
        name = str(meta.get("name", ""))
        if self.items.get(name) != entry:
            self.items[name] = entry
            self.changed(name)

    def delete(self, key: str, obj: Mapping[str, Any] | None) -> None:
        """A namespace is gone."""
        if self.items.pop(key, None) is not None:
            self.changed(key)

    def listed(self) -> None:
        """Nothing to do after a complete LIST."""


class Policies:
    """Valid DaskGPUPolicies by name; an invalid one is logged and ignored."""

    def __init__(self, changed: Callable[[], None]) -> None:
        self.changed = changed
        self.items: dict[str, Policy] = {}

    def upsert(self, obj: Mapping[str, Any]) -> None:
        """A DaskGPUPolicy was listed, added or changed."""
        name = object_key(obj)
        try:
            policy: Policy | None = load(dict(obj))
        except PolicyError as exc:
            log.error(f"DaskGPUPolicy {name} is invalid and ignored: {exc}")
            policy = None
        if self.items.get(name) == policy:
            return
        if policy is None:
            del self.items[name]
        else:
            self.items[name] = policy
        self.changed()

    def delete(self, key: str, obj: Mapping[str, Any] | None) -> None:
        """A DaskGPUPolicy is gone."""
        if self.items.pop(key, None) is not None:
            self.changed()

    def listed(self) -> None:
        """Nothing to do after a complete LIST."""
