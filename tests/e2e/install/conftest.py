"""One proving ground with a real node, both operators installed on it by ``helm install``.

The ground is package-scoped: our chart's webhooks cover every namespace and the chart-installed
dask operator watches every namespace, so they must not meet the other e2e tests' host-process
operators. It is a ground of its own (``ProvingGround(real_node=True)``), torn down after this
folder's tests.

Skips (one reason each) when the images (``make images``) or the node's binaries are missing;
under ``CI`` those are failures, like every other missing build step.
"""

from __future__ import annotations

import subprocess
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import NoReturn

import pytest

from provingground import BinariesMissingError, ProvingGround, StaleCacheError, find_binaries
from provingground.install import Helm, Installed, uninstall
from provingground.pytest_plugin import skip_or_fail
from provingground.realnode import (
    BuiltImages,
    ImagesMissingError,
    NodeMissingError,
    built_images,
    install_built,
    real_node_ground,
    real_node_name,
)


@dataclass
class InstalledGround:
    """The ground, the node that runs containers, the images, and what the install printed."""

    ground: ProvingGround
    node: str
    images: BuiltImages
    installed: Installed
    helm: Helm

    def kubectl(
        self, *args: str, check: bool = True, stdin: str | None = None
    ) -> subprocess.CompletedProcess[str]:
        """kubectl against this ground."""
        return self.ground.control_plane.kubectl(*args, check=check, input=stdin)


def _missing(reason: str) -> NoReturn:
    skip_or_fail(reason, "the install e2e tests must run")


@pytest.fixture(scope="package")
def installed(tmp_path_factory: pytest.TempPathFactory) -> Iterator[InstalledGround]:
    """Both charts installed on a ground with a real node; uninstalled and stopped afterwards."""
    try:
        bins = find_binaries()
        images = built_images()
        ground = real_node_ground(tmp_path_factory.mktemp("install-ground"), bins, images)
    except (BinariesMissingError, StaleCacheError, ImagesMissingError, NodeMissingError) as exc:
        _missing(str(exc))
        raise  # unreachable: _missing skips or fails
    with ground:
        cp = ground.control_plane
        node = real_node_name(ground)
        helm, done = install_built(ground, images, Path(tmp_path_factory.mktemp("helm-home")))
        print(f"\nInstalled on {node}: {done.timings}")
        yield InstalledGround(ground, node, images, done, helm)
        # Every Pod gone before the node stops: its clean-up then finds no cgroups being removed.
        cp.kubectl("delete", "daskclusters", "--all", "--all-namespaces", "--wait", check=False)
        uninstall(helm)
        cp.kubectl(
            "wait", "--for=delete", "pods", "--all", "--all-namespaces", "--timeout=120s",
            check=False,
        )  # fmt: skip
