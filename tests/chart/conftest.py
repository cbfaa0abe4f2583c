"""Fixtures of the chart tests: helm, the chart tools, and the proving ground for e2e.

The cluster fixtures (``cluster``, ``namespace``, ``dask_operator``, ...) come from
``provingground/pytest_plugin.py``, shared with the e2e tests: one proving ground per session.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from provingground import BinariesMissingError, StaleCacheError, find_binaries

from .helpers import CI_VALUES, TOOLS, TOOLS_HINT, Helm, missing


@pytest.fixture(scope="session")
def helm_binary() -> Path:
    """helm v4 from the proving-ground build (`make controlplane`)."""
    try:
        return find_binaries().helm
    except (BinariesMissingError, StaleCacheError) as exc:
        missing(str(exc))
        raise  # unreachable: _missing skips or fails


@pytest.fixture(scope="session")
def helm(helm_binary: Path, tmp_path_factory: pytest.TempPathFactory) -> Helm:
    """helm with a private home, no cluster (template and lint only)."""
    return Helm(helm_binary, tmp_path_factory.mktemp("helm-home"))


@pytest.fixture(scope="session")
def renders(helm: Helm) -> dict[str, list[dict]]:
    """Every ci/*-values.yaml rendered once: values file name -> objects."""
    return {name: helm.template([name]) for name in CI_VALUES}


@pytest.fixture(scope="session")
def tool():
    """Path of checkov or hadolint from .cache/chart-tools (skip, or fail under CI, if absent)."""

    def find(name: str) -> Path:
        path = TOOLS / name
        if not path.is_file():
            missing(f"{path} not found: {TOOLS_HINT}")
        return path

    return find
