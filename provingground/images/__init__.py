"""Our images, built from the Dockerfile users build, without Docker and without a registry.

``make images`` (``python -m provingground.images``) builds them with BuildKit as OCI archives into
``.images/`` and writes ``.images/images.json``; :func:`catalog` reads it. See
docs/proving-ground.md, "Images".
"""

from provingground.images.catalog import (
    IMAGE_NAMES,
    CatalogError,
    Image,
    catalog,
    default_catalog_path,
)

__all__ = ["IMAGE_NAMES", "CatalogError", "Image", "catalog", "default_catalog_path"]
