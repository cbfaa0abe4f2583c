# syntax=docker/dockerfile:1
# The dask-gpu-parity operator image, `docker build -t dask-gpu-parity .`, and the probe image,
# `docker build --target probe -t dask-gpu-parity-probe .`.
#
# Stage 1 builds the package as a wheel; the final stage installs that wheel (with the
# `in-cluster` extra: the operator in a Pod, without the Kubernetes client) into a virtual environment from prebuilt wheels only, so the image has no
# compilers, no build tools and no source tree. tests/chart/test_dockerfile.py runs the same
# pip commands in a fresh venv, and lints this file with hadolint.
#
# PYTHON_VERSION picks the python:<version>-slim-bookworm base; `make images` builds with the
# Python of its stand-in base made from Debian bookworm's packages (3.11).
ARG PYTHON_VERSION=3.12
FROM python:${PYTHON_VERSION}-slim-bookworm AS build
ENV PIP_DISABLE_PIP_VERSION_CHECK=1 \
    PIP_NO_CACHE_DIR=1 \
    PIP_ROOT_USER_ACTION=ignore
WORKDIR /src
# .dockerignore lets in only pyproject.toml, README.md, LICENSE and operator/.
COPY . .
RUN python -m pip wheel --no-deps --wheel-dir /dist .

# The probe image, `docker build --target probe -t dask-gpu-parity-probe .`: probe.py (standard
# library only) on busybox, whose `cp` the gpu-parity-probe init container runs to copy it into
# an emptyDir of the scheduler pod, where gpu-parity-check runs it in the scheduler's own image
# (docs/probe.md). No Python here, nothing run at build time: a small pull onto GPU nodes, which
# never need the operator image below. Published as ghcr.io/dask-gpu-parity/dask-gpu-parity-probe
# with the release's version as its tag, which the chart and the CLI name.
FROM busybox:1.37.0 AS probe
LABEL org.opencontainers.image.title="dask-gpu-parity-probe" \
      org.opencontainers.image.description="The gpu-parity-check probe, copied into Dask scheduler pods" \
      org.opencontainers.image.licenses="Apache-2.0"
COPY --chmod=0644 operator/dask_gpu_parity/probe.py /probe.py
# Not a GPU container, even under a legacy nvidia runtime set as the default (the injected init
# container also says so in its env); the numeric user is the injected runAsUser.
ENV NVIDIA_VISIBLE_DEVICES=void
USER 65532:65532
CMD ["cp", "/probe.py", "/gpu-parity/probe.py"]

# The operator image, the default target: `docker build -t dask-gpu-parity .`
FROM python:${PYTHON_VERSION}-slim-bookworm
LABEL org.opencontainers.image.title="dask-gpu-parity" \
      org.opencontainers.image.description="Make the Dask scheduler match its GPU workers on Kubernetes" \
      org.opencontainers.image.licenses="Apache-2.0"
ENV PIP_DISABLE_PIP_VERSION_CHECK=1 \
    PIP_NO_CACHE_DIR=1 \
    PIP_ROOT_USER_ACTION=ignore \
    PYTHONDONTWRITEBYTECODE=1 \
    PYTHONUNBUFFERED=1 \
    VIRTUAL_ENV=/opt/dask-gpu-parity \
    PATH=/opt/dask-gpu-parity/bin:$PATH
# --only-binary=:all: fails the build rather than compile anything in this stage.
RUN --mount=type=bind,from=build,source=/dist,target=/dist \
    python -m venv "$VIRTUAL_ENV" \
 && "$VIRTUAL_ENV/bin/pip" install --only-binary=:all: "$(echo /dist/dask_gpu_parity-*.whl)[in-cluster]" \
 && "$VIRTUAL_ENV/bin/pip" uninstall --yes pip \
 && dask-gpu-parity --version \
 && echo 'nonroot:x:65532:65532:nonroot:/nonexistent:/usr/sbin/nologin' >>/etc/passwd \
 && echo 'nonroot:x:65532:' >>/etc/group
# A numeric non-root user (the chart's runAsUser); it owns nothing in the image. Its passwd entry
# is there because kopf names the operator after getpass.getuser() unless POD_ID is set: without
# one, `docker run IMAGE run` stops there.
USER 65532:65532
EXPOSE 9443 8080 8081
# kopf's liveness endpoint (the chart uses its own probes; this is for `docker run`).
HEALTHCHECK --interval=30s --timeout=5s --start-period=60s --retries=3 \
    CMD ["python", "-c", "import urllib.request; urllib.request.urlopen('http://127.0.0.1:8081/healthz', timeout=4)"]
# The entrypoint is the CLI, so `docker run IMAGE check -` checks stdin; the default command runs
# the operator, and the chart passes `run` and its flags as args.
ENTRYPOINT ["dask-gpu-parity"]
CMD ["run", "--tls-cert=/certs/tls.crt", "--tls-key=/certs/tls.key"]
