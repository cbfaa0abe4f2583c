"""Write the bundled Dask CRD schemas (`make crd-schemas`): `python scripts/crd_schemas.py CRD…`.

A developer tool: it is not part of the package.
"""

from __future__ import annotations

import json
import sys

import yaml

from dask_gpu_parity.core.schema import extract


def render(paths: list[str]) -> str:
    """The JSON text of ``core/data/dask_crds.json`` for the given CRD files."""
    crds = []
    for path in paths:
        with open(path, encoding="utf-8") as handle:
            crds.append(yaml.safe_load(handle))
    return json.dumps(extract(crds), sort_keys=True, separators=(",", ":")) + "\n"


if __name__ == "__main__":
    sys.stdout.write(render(sys.argv[1:]))
