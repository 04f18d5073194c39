# syntax=docker/dockerfile:1
# karpy's controller image: karpy with the kwok, AWS and Azure providers, running
# `karpy run` as a non-root user. Every setting comes from the environment under
# Karpenter's names (the Helm chart in charts/karpy sets them).
#
#   docker build -t karpy:0.1.0 .        (or: podman build / buildah bud)
#
# scripts/image.sh builds the same image without a base image to pull (from Debian's
# packages); both install image-requirements.lock with --require-hashes and start
# `karpy run` as 65532 from /opt/karpy, on the same Python minor version (Debian
# bookworm's python3) — tests/image/test_dockerfile.py keeps them in step.
#
# The base is named by tag: its digest could not be learnt where this file is tested
# (no registry access). To pin it, look the digest up (`docker buildx imagetools inspect
# python:3.11-slim`, or `skopeo inspect docker://python:3.11-slim`) and write
# `FROM python:${PYTHON_VERSION}-slim@sha256:<digest>` in both stages (docs/install.md).

ARG PYTHON_VERSION=3.11

# -- build: every dependency from the lock (exact versions, checked against their
# hashes), then karpy and the providers themselves without dependencies; pip check
# proves the lock covers them. image-requirements.lock is made by uv (docs/install.md).
FROM python:${PYTHON_VERSION}-slim AS build
ENV PIP_NO_CACHE_DIR=1 \
    PIP_DISABLE_PIP_VERSION_CHECK=1 \
    PYTHONDONTWRITEBYTECODE=1
WORKDIR /src
COPY image-requirements.lock pyproject.toml README.md LICENSE ./
COPY karpy ./karpy
COPY providers/aws ./providers/aws
COPY providers/azure ./providers/azure
RUN python -m venv /opt/karpy \
 && /opt/karpy/bin/pip install --require-hashes --no-deps -r image-requirements.lock \
 && /opt/karpy/bin/pip install --no-deps ".[speed]" ./providers/aws ./providers/azure \
 && /opt/karpy/bin/pip check \
 && /opt/karpy/bin/python -m compileall -q /opt/karpy/lib

# -- run: the venv on a clean slim base; nothing from the build stage but /opt/karpy.
FROM python:${PYTHON_VERSION}-slim
LABEL org.opencontainers.image.title="karpy" \
      org.opencontainers.image.description="A Kubernetes node autoscaler that speaks Karpenter's v1 API" \
      org.opencontainers.image.licenses="Apache-2.0"
COPY --from=build /opt/karpy /opt/karpy
ENV PATH=/opt/karpy/bin:$PATH \
    PYTHONDONTWRITEBYTECODE=1 \
    PYTHONUNBUFFERED=1
# The chart runs it with readOnlyRootFilesystem; karpy writes nothing to disk.
USER 65532:65532
EXPOSE 8080 8081
ENTRYPOINT ["karpy", "run"]
