"""What the install path needs from the image build and the real node, in one place.

``built_images()`` reads the catalog ``make images`` writes (``.images/images.json``);
``real_node_ground()`` starts a proving ground whose control plane also has a node that runs
containers (kubelet, containerd, runc, CNI, kube-proxy, CoreDNS), beside the kwok pools. Each
raises one error that says what to build when its part is missing.
"""

from __future__ import annotations

import importlib
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path

from .binaries import Binaries
from .ground import ProvingGround
from .install import Helm, Installed, install
from .policyreports import install_policyreport_crd

__all__ = [
    "IMAGES_JSON",
    "BuiltImages",
    "ImagesMissingError",
    "NodeMissingError",
    "built_images",
    "install_built",
    "real_node_ground",
    "real_node_name",
]

REPO = Path(__file__).resolve().parents[1]
IMAGES_JSON = REPO / ".images" / "images.json"
IMAGES_HINT = "run `make images` (the operator, probe, dask operator and Dask images)"


class ImagesMissingError(RuntimeError):
    """``make images`` has not been run, or its catalog lacks an image the install needs."""


class NodeMissingError(RuntimeError):
    """The real node cannot be started here (its binaries are not built, or no support)."""


@dataclass(frozen=True)
class BuiltImages:
    """The references the install uses, and the digests a container runtime may report.

    Attributes:
        operator: dask-gpu-parity's image (the chart's default reference).
        probe: The probe image (the chart's default policy's verifier image).
        dask_operator: The dask-kubernetes operator's image.
        dask: The CPU Dask image for schedulers and workers on the real node.
        digests: Reference -> the ``sha256:...`` digests that identify it (manifest, config).
        archives: The OCI archives, imported into the real node's containerd.
    """

    operator: str
    probe: str
    dask_operator: str
    dask: str
    digests: dict[str, frozenset[str]] = field(default_factory=dict)
    archives: tuple[Path, ...] = ()

    def matches(self, reference: str, image_id: str) -> bool:
        """Whether a container status's ``imageID`` is the built image of ``reference``."""
        digest = "sha256:" + image_id.rsplit("sha256:", 1)[-1]
        return digest in self.digests.get(reference, frozenset())


def built_images(path: Path = IMAGES_JSON) -> BuiltImages:
    """The catalog of ``make images``, read by ``provingground.images.catalog``.

    Raises:
        ImagesMissingError: no catalog, or an image the install needs is not in it.
    """
    try:
        images = importlib.import_module("provingground.images")
    except ImportError as exc:
        raise ImagesMissingError(f"No image build in this tree ({exc}): {IMAGES_HINT}") from exc
    try:
        entries = images.catalog(path)
    except images.CatalogError as exc:
        raise ImagesMissingError(str(exc)) from exc
    refs = {str(name): str(entry.reference) for name, entry in entries.items()}
    # A runtime reports an image imported by tag by its ID (the config's digest), a pulled one by
    # repo@<manifest digest>: either identifies the built image.
    oci = importlib.import_module("provingground.images.oci")
    digests = {
        str(e.reference): frozenset(
            {str(e.digest), str(oci.read_archive(e.archive).manifest["config"]["digest"])}
        )
        for e in entries.values()
    }
    missing = [w for w in ("operator", "probe", "dask-operator", "dask") if w not in refs]
    if missing:
        raise ImagesMissingError(f"{path} has no {', '.join(missing)} image: {IMAGES_HINT}")
    archives = tuple(Path(e.archive) for e in entries.values())
    return BuiltImages(
        refs["operator"], refs["probe"], refs["dask-operator"], refs["dask"], digests, archives
    )


def real_node_ground(
    run_dir: Path,
    binaries: Binaries,
    images: BuiltImages | None = None,
    sizes: Mapping[str, int] | None = None,
) -> ProvingGround:
    """A proving ground with the real node (``images`` imported into it), no host dask operator.

    Raises:
        NodeMissingError: the real node's binaries are not built (``make node``).
    """
    from .node import NodeBinariesMissingError  # noqa: PLC0415  # the node is optional

    archives = list(images.archives) if images else []
    try:
        return ProvingGround(
            run_dir,
            sizes=sizes,
            dask_operator=False,
            binaries=binaries,
            real_node=True,
            node_images=archives,
        )
    except NodeBinariesMissingError as exc:
        raise NodeMissingError(str(exc)) from exc


def real_node_name(ground: ProvingGround) -> str:
    """The name of the ground's node that runs containers."""
    node = getattr(ground, "real_node", None)
    name = getattr(node, "name", None)
    if not isinstance(name, str):
        raise NodeMissingError("The proving ground was started without its real node")
    return name


def install_built(
    ground: ProvingGround, images: BuiltImages, helm_home: Path
) -> tuple[Helm, Installed]:
    """Install both charts onto ``ground``'s real node from the built images.

    The dask operator's chart gets the catalog's image; ours keeps its defaults, which must name
    the catalog's operator and probe images (``install`` checks). The PolicyReport CRD is
    installed first, as on a cluster that runs Kyverno: the drift Pod writes reports.
    """
    cp = ground.control_plane
    helm = Helm(cp.binaries.helm, helm_home, cp.kubeconfig)
    install_policyreport_crd(cp.kubectl)  # the cluster's policy engine's, as with Kyverno
    installed = install(
        helm,
        cp.kubectl,
        images.dask_operator,
        real_node_name(ground),
        expect_images={"operator": images.operator, "probe": images.probe},
    )
    return helm, installed
