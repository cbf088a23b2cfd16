# stszone admission webhook: slim, non-root, and happy on a read-only root filesystem.
#
#   docker build -t stszone:0.1.0 .
#   kind load docker-image stszone:0.1.0 --name stszone   # the tag deploy/ uses by default
#
# The Deployment in deploy/ runs it with runAsUser 65532, readOnlyRootFilesystem and the
# serving pair mounted at /etc/stszone/tls; tests/test_dockerfile.py keeps the two in step.
# Dependencies come from requirements/*.lock (exact versions and sha256 of every file, made by
# `python tools/lock.py`); tools/image-check.sh builds and checks the image with no registry.
# docs/image.md says what the image holds and how big each part is.

ARG PYTHON_IMAGE=python:3.12-slim-bookworm

# Build: the locked dependencies, then a wheel from pyproject.toml, installed into a virtualenv
# that the runtime stage copies whole (same base image, so the interpreter path matches).
FROM ${PYTHON_IMAGE} AS build
# Another package index than PyPI, and a CA bundle for it (tools/image-check.sh passes the
# host's when a TLS-intercepting proxy sits in the way); the build stage alone sees them.
ARG INDEX_URL=
ARG CA_BUNDLE=
ENV PIP_DISABLE_PIP_VERSION_CHECK=1 \
    PIP_NO_CACHE_DIR=1 \
    PIP_ROOT_USER_ACTION=ignore
WORKDIR /src
# The dependency layer depends on the lock files alone: editing the source reuses it.
# --only-binary: every pin has a wheel for Linux, and the slim base has no compiler anyway.
COPY requirements/image.lock requirements/build.lock ./requirements/
RUN python -m venv /opt/stszone \
    && /opt/stszone/bin/pip install --no-compile --no-deps --require-hashes --only-binary=:all: \
        ${INDEX_URL:+--index-url "$INDEX_URL"} ${CA_BUNDLE:+--cert "$CA_BUNDLE"} \
        -r requirements/image.lock -r requirements/build.lock
COPY pyproject.toml README.md ./
COPY webhook ./webhook
COPY tools/precompile.py ./tools/
# The build backend (setuptools, pinned in build.lock) builds the wheel from the venv, then
# leaves with pip: the runtime carries neither. Bytecode: only the modules the server imports.
RUN /opt/stszone/bin/pip wheel --no-deps --no-build-isolation --wheel-dir /wheels . \
    && /opt/stszone/bin/pip install --no-compile --no-deps /wheels/stszone-*.whl \
    && /opt/stszone/bin/pip uninstall --yes --quiet pip setuptools \
    && /opt/stszone/bin/python -B tools/precompile.py --site-packages \
    && /opt/stszone/bin/stszone serve --help > /dev/null

# Runtime: no compiler, no pip, no source tree; nothing is written at run time.
FROM ${PYTHON_IMAGE}
COPY --from=build /opt/stszone /opt/stszone
# The root filesystem is read-only at run time, so a standard-library module without bytecode
# would be compiled in memory at every start: compile the ones the server imports (a base
# image that already ships them, as Debian's python3 does, is left as it is).
RUN --mount=type=bind,from=build,source=/src/tools/precompile.py,target=/tmp/precompile.py \
    /opt/stszone/bin/python -B /tmp/precompile.py --stdlib
ENV PATH=/opt/stszone/bin:$PATH \
    PYTHONDONTWRITEBYTECODE=1 \
    PYTHONUNBUFFERED=1
# Numeric, so the kubelet can verify runAsNonRoot without an /etc/passwd entry.
USER 65532:65532
EXPOSE 8443
ENTRYPOINT ["stszone", "serve"]
