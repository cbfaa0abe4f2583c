"""What ``node.py --chart`` carries, made here: both charts and helm, the built images packed.

Run on the build machine (``make images`` done, helm and the dask-kubernetes sdist in the cache)::

    python benchmarks/gpu/node/chart_prep.py --images .images --out .run/h200/chart \
      --helm ~/.cache/dask-gpu-parity/bin/v1.36.3/helm --payload .gpunode/payload

- ``charts/`` and ``values/``: the dask operator's own chart (from the dask-kubernetes sdist,
  ``provingground.daskchart``) and ``charts/dask-gpu-parity``, with the values
  ``provingground/install.py`` gives (the dask operator's image and ``IfNotPresent``) plus
  tolerations for the GPU node's taint; ``helm.xz``: the proving ground's helm binary. The GPU
  machine runs ``helm install`` itself (``chart.py``).
- ``iptables/``: Debian bookworm's ``iptables`` and its libraries as ``.deb`` files
  (``apt-get download``): the GPU machine has no netfilter tools, and kube-proxy needs them
  (``chart.py`` unpacks them and puts wrappers on the node's ``PATH``).
- ``--payload``: a ``system:kube-proxy`` client certificate joins the payload's PKI.
- ``images.tar.xz.NN``: one OCI layout holding the operator, dask-operator and probe images
  (``make images``), each layer stored once and uncompressed (their ``diff_id``), the whole
  xz-compressed and split so that each part fits one device call. The images' config digests
  (their IDs) are unchanged: only the layers' transport encoding differs.

On the GPU machine ``node.py --chart`` calls ``unpack_images`` (standard library only).
"""

from __future__ import annotations

import argparse
import gzip
import hashlib
import io
import json
import shutil
import subprocess
import sys
import tarfile
from collections.abc import Callable
from pathlib import Path

REPO = Path(__file__).resolve().parents[3]
IMAGES = ("operator", "dask-operator", "probe")
GPU_TOLERATION = {"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"}
SDIST = Path.home() / ".cache/dask-gpu-parity/sdist/dask-kubernetes-2026.3.0"
LAYER = "application/vnd.oci.image.layer.v1.tar"


def _blob(layout: Path, data: bytes) -> str:
    digest = hashlib.sha256(data).hexdigest()
    path = layout / "blobs" / "sha256" / digest
    if not path.exists():
        path.write_bytes(data)
    return f"sha256:{digest}"


def pack_images(images: Path, out: Path) -> list[dict[str, str]]:
    """One OCI layout with every image, layers uncompressed; return name and config per image."""
    layout = out / "layout"
    shutil.rmtree(layout, ignore_errors=True)
    (layout / "blobs" / "sha256").mkdir(parents=True)
    index: list[dict[str, object]] = []
    rows = []
    for name in IMAGES:
        with tarfile.open(images / f"{name}.tar") as tar:

            def read(digest: str, tar: tarfile.TarFile = tar) -> bytes:
                member = tar.extractfile(f"blobs/sha256/{digest.split(':', 1)[1]}")
                assert member is not None  # a regular file in the archive
                return member.read()

            top = json.loads(read_member(tar, "index.json"))
            for desc in top["manifests"]:
                manifest = json.loads(read(desc["digest"]))
                layers = []
                for layer in manifest["layers"]:
                    data = read(layer["digest"])
                    if layer["mediaType"].endswith("gzip"):
                        data = gzip.decompress(data)
                    layers.append(
                        {"mediaType": LAYER, "digest": _blob(layout, data), "size": len(data)}
                    )
                _blob(layout, read(manifest["config"]["digest"]))
                new = {**manifest, "layers": layers}
                body = json.dumps(new, separators=(",", ":")).encode()
                index.append({**desc, "digest": _blob(layout, body), "size": len(body)})
                rows.append(
                    {
                        "name": desc["annotations"]["io.containerd.image.name"],
                        "config": manifest["config"]["digest"],
                        "built_manifest": desc["digest"],
                    }
                )
    (layout / "oci-layout").write_text('{"imageLayoutVersion":"1.0.0"}')
    (layout / "index.json").write_text(
        json.dumps(
            {
                "schemaVersion": 2,
                "mediaType": "application/vnd.oci.image.index.v1+json",
                "manifests": index,
            }
        )
    )
    return rows


def read_member(tar: tarfile.TarFile, name: str) -> bytes:
    """A member's bytes (``./name`` or ``name``)."""
    for candidate in (name, f"./{name}"):
        try:
            member = tar.extractfile(candidate)
        except KeyError:
            continue
        if member is not None:
            return member.read()
    raise KeyError(name)


IPTABLES_DEBS = (
    "iptables",
    "libxtables12",
    "libip4tc2",
    "libip6tc2",
    "libnfnetlink0",
    "libnetfilter-conntrack3",
    "libnftnl11",
    "libmnl0",
)


def charts(helm: Path, out: Path, dask_operator_image: str, dask_chart: Path) -> None:
    """Both charts, their values as ``provingground/install.py`` gives them, helm (xz)."""
    name, _, tag = dask_operator_image.rpartition(":")
    values = {
        "dask-kubernetes-operator": {
            "image": {"name": name, "tag": tag, "pullPolicy": "IfNotPresent"},
            "tolerations": [GPU_TOLERATION],
        },
        "dask-gpu-parity": {"tolerations": [GPU_TOLERATION]},
    }
    sources = {
        "dask-kubernetes-operator": dask_chart,
        "dask-gpu-parity": REPO / "charts" / "dask-gpu-parity",
    }
    for sub in ("charts", "values"):
        shutil.rmtree(out / sub, ignore_errors=True)
        (out / sub).mkdir(parents=True)
    for key, src in sources.items():
        shutil.copytree(src, out / "charts" / key, ignore=shutil.ignore_patterns("ci"))
        (out / "values" / f"{key}.json").write_text(json.dumps(values[key], indent=1))
    with (out / "helm.xz").open("wb") as f:
        subprocess.run(["xz", "-6", "-T2", "-c", str(helm)], stdout=f, check=True)


def iptables_debs(out: Path) -> None:
    """Debian's iptables and its libraries, downloaded by apt (the build machine's release)."""
    debs = out / "iptables"
    shutil.rmtree(debs, ignore_errors=True)
    debs.mkdir(parents=True)
    subprocess.run(
        ["apt-get", "download", *IPTABLES_DEBS], cwd=debs, check=True, capture_output=True
    )


def proxy_cert(payload: Path) -> None:
    """A ``system:kube-proxy`` client certificate from the payload's CA (as the CI node's)."""
    sys.path.insert(0, str(REPO))
    from provingground.pki import CertificateAuthority  # the dev venv

    CertificateAuthority(payload / "pki").issue(
        "kube-proxy", common_name="system:kube-proxy", client=True
    )


def unpack_images(chart_dir: Path, images: Path, sh: Callable[..., str]) -> list[str]:
    """``images/chart.tar``: the split xz layout, with any ``*-update.tar.xz`` laid over it.

    An update holds one rebuilt image without the layers it shares with the first archive
    (``chart_prep.py``): its blobs join the layout and its manifest replaces the old one's.
    """
    layout, upd = images / "chart-layout", images / "chart-update"
    layout.mkdir(exist_ok=True)
    parts = " ".join(str(p) for p in sorted(chart_dir.glob("images.tar.xz.*")))
    sh(["sh", "-c", f"cat {parts} | xz -T0 -dc | tar -x -C {layout}"], check=True, timeout=300)
    index = json.loads((layout / "index.json").read_text())
    for update in sorted(chart_dir.glob("*-update.tar.xz")):
        upd.mkdir()
        sh(["sh", "-c", f"xz -T0 -dc {update} | tar -x -C {upd}"], check=True, timeout=300)
        for blob in (upd / "blobs" / "sha256").iterdir():
            blob.replace(layout / "blobs" / "sha256" / blob.name)
        new = json.loads((upd / "index.json").read_text())["manifests"]
        names = {m["annotations"]["io.containerd.image.name"] for m in new}
        index["manifests"] = [
            m
            for m in index["manifests"]
            if m["annotations"]["io.containerd.image.name"] not in names
        ] + new
        sh(["rm", "-rf", str(upd)], check=True)
    (layout / "index.json").write_text(json.dumps(index))
    sh(["tar", "-cf", str(images / "chart.tar"), "-C", str(layout), "."], check=True, timeout=300)
    sh(["rm", "-rf", str(layout)], check=True, timeout=120)
    return [
        f"{m['annotations']['io.containerd.image.name']} {m['digest']}" for m in index["manifests"]
    ]


def main() -> int:
    """Command line: see the module docstring."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--images", type=Path, required=True, help="make images' .images/")
    parser.add_argument("--out", type=Path, required=True)
    parser.add_argument("--helm", type=Path, required=True)
    parser.add_argument(
        "--dask-chart",
        type=Path,
        default=SDIST / "dask_kubernetes/operator/deployment/helm/dask-kubernetes-operator",
        help="the dask operator's chart, unpacked from the dask-kubernetes sdist",
    )
    parser.add_argument("--payload", type=Path, help="the node payload: gets kube-proxy's cert")
    parser.add_argument("--part-mib", type=int, default=50)
    args = parser.parse_args()
    args.out.mkdir(parents=True, exist_ok=True)
    catalog = json.loads((args.images / "images.json").read_text())
    dask_operator = next(
        v["reference"] for k, v in catalog["images"].items() if k == "dask-operator"
    )
    charts(args.helm, args.out, dask_operator, args.dask_chart)
    iptables_debs(args.out)
    if args.payload:
        proxy_cert(args.payload)
    rows = pack_images(args.images, args.out)
    (args.out / "images.json").write_text(json.dumps(rows, indent=1))
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w", format=tarfile.PAX_FORMAT) as tar:
        tar.add(str(args.out / "layout"), arcname=".")
    shutil.rmtree(args.out / "layout")
    xz = subprocess.run(
        ["xz", "-6", "-T2", "-c"],
        input=buf.getvalue(),
        capture_output=True,
        check=True,
    ).stdout
    size = args.part_mib << 20
    for i in range(0, len(xz), size):
        (args.out / f"images.tar.xz.{i // size:02d}").write_bytes(xz[i : i + size])
    print(json.dumps({"images": rows, "tar": len(buf.getvalue()), "xz": len(xz)}))
    return 0


if __name__ == "__main__":
    sys.exit(main())
