# syntax=docker/dockerfile:1
# A CPU Dask image for the proving ground's DaskClusters (`make images` builds it as
# localhost/provingground/dask:<distributed version>): Python with the dask and distributed
# versions of the repository's development environment (make images passes them).
ARG PYTHON_VERSION=3.12
FROM python:${PYTHON_VERSION}-slim-bookworm
ARG DASK_VERSION
ARG DISTRIBUTED_VERSION
ENV PIP_DISABLE_PIP_VERSION_CHECK=1 \
    PIP_NO_CACHE_DIR=1 \
    PIP_ROOT_USER_ACTION=ignore \
    PYTHONDONTWRITEBYTECODE=1 \
    PYTHONUNBUFFERED=1
RUN python -m pip install --only-binary=:all: "dask==${DASK_VERSION}" "distributed==${DISTRIBUTED_VERSION}"
# distributed ships only `dask scheduler` and `dask worker`; the DaskCluster manifests (and
# dask-kubernetes' own KubeCluster) run `dask-scheduler` and `dask-worker`.
RUN printf '#!/bin/sh\nexec dask scheduler "$@"\n' > /usr/local/bin/dask-scheduler \
 && printf '#!/bin/sh\nexec dask worker "$@"\n' > /usr/local/bin/dask-worker \
 && chmod 0755 /usr/local/bin/dask-scheduler /usr/local/bin/dask-worker \
 && dask-scheduler --version && dask-worker --version
CMD ["python3"]
