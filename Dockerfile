# stszone admission webhook: slim, non-root, and happy on a read-only root filesystem.
#
#   docker build -t stszone:0.1.0 .
#   kind load docker-image stszone:0.1.0 --name stszone   # the tag deploy/ uses by default
#
# The Deployment in deploy/ runs it with runAsUser 65532, readOnlyRootFilesystem and the
# serving pair mounted at /etc/stszone/tls; tests/test_dockerfile.py keeps the two in step.
# The package ships as the Python the tests run, with its bytecode; no stage installs a compiler.
# Dependencies come from requirements/*.lock (exact versions and sha256 of every file, made by
# `python tools/lock.py`, which also writes their CycloneDX SBOM, shipped at
# /opt/stszone/sbom/python.cdx.json); tools/image-check.sh builds and checks the image with no
# registry.
# docs/image.md says what the image holds and how big each part is.

ARG PYTHON_IMAGE=python:3.12-slim-bookworm

# Build: two virtualenvs. /opt/build holds pip and the build backend (hatchling, from
# build.lock) and is never copied; /opt/stszone, made without pip and filled by /opt/build's
# pip, gets the locked runtime dependencies and the stszone wheel, and the runtime stage
# copies it whole (same base image, so the interpreter path matches).
FROM ${PYTHON_IMAGE} AS build
# Another package index than PyPI, and a CA bundle for it (tools/image-check.sh passes the
# host's when a TLS-intercepting proxy sits in the way); the build stage alone sees them.
ARG INDEX_URL=
ARG CA_BUNDLE=
ENV PIP_DISABLE_PIP_VERSION_CHECK=1 \
    PIP_NO_CACHE_DIR=1 \
    PIP_ROOT_USER_ACTION=ignore
WORKDIR /src
# Each dependency layer depends on its lock file alone: editing the source reuses both, and
# a new runtime pin reuses the build backend. --only-binary: every pin has a wheel for Linux.
COPY requirements/build.lock ./requirements/
RUN python -m venv /opt/build \
    && /opt/build/bin/pip install --no-deps --require-hashes --only-binary=:all: \
        ${INDEX_URL:+--index-url "$INDEX_URL"} ${CA_BUNDLE:+--cert "$CA_BUNDLE"} \
        -r requirements/build.lock
# --without-pip: the runtime venv never holds pip or setuptools; `pip --python` (pip 22.3 or
# newer: bookworm's ensurepip has 23.0.1) runs /opt/build's pip against it.
COPY requirements/image.lock ./requirements/
RUN python -m venv --without-pip /opt/stszone \
    && /opt/build/bin/pip --python /opt/stszone/bin/python install \
        --no-compile --no-deps --require-hashes --only-binary=:all: \
        ${INDEX_URL:+--index-url "$INDEX_URL"} ${CA_BUNDLE:+--cert "$CA_BUNDLE"} \
        -r requirements/image.lock
# The CycloneDX SBOM of those packages, made from image.lock (tools/lock.py): it lists exactly
# what the step above installed, with versions and hashes, and travels with the venv.
COPY requirements/image.cdx.json /opt/stszone/sbom/python.cdx.json
COPY pyproject.toml README.md ./
COPY webhook ./webhook
COPY tools/precompile.py ./tools/
# The wheel, without build isolation: the pinned backend of /opt/build builds it, not whatever
# an isolated build would fetch. It is pure Python (py3-none-any: the install fails on any
# other name), the sources as the tests run them. Then precompile.py gives bytecode to the
# modules the server imports, and the server's command line must start.
RUN /opt/build/bin/pip wheel --no-deps --no-build-isolation --wheel-dir /wheels . \
    && /opt/build/bin/pip --python /opt/stszone/bin/python install \
        --no-compile --no-deps /wheels/stszone-*-py3-none-any.whl \
    && /opt/stszone/bin/python -B tools/precompile.py --site-packages \
    && /opt/stszone/bin/stszone serve --help > /dev/null

# Runtime: no pip, no build backend, no source tree; nothing is written at run time.
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
