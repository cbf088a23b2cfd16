# stszone admission webhook: slim, non-root, and happy on a read-only root filesystem.
#
#   docker build -t stszone:0.1.0 .
#   kind load docker-image stszone:0.1.0 --name stszone   # the tag deploy/ uses by default
#
# The Deployment in deploy/ runs it with runAsUser 65532, readOnlyRootFilesystem and the
# serving pair mounted at /etc/stszone/tls; tests/test_dockerfile.py keeps the two in step.
# The engine (webhook.model, webhook.rules, webhook.wire) ships compiled to C by mypyc, the
# build hook in pyproject.toml; the rest of the package ships as Python with its bytecode.
# Dependencies come from requirements/*.lock (exact versions and sha256 of every file, made by
# `python tools/lock.py`); tools/image-check.sh builds and checks the image with no registry.
# docs/image.md says what the image holds and how big each part is.

ARG PYTHON_IMAGE=python:3.12-slim-bookworm

# Build: two virtualenvs. /opt/build holds the build tools (hatchling, hatch-mypyc, mypy, from
# build.lock) and is never copied; /opt/stszone, made without pip and filled by /opt/build's
# pip, gets the locked runtime dependencies and the compiled wheel, and the runtime stage
# copies it whole (same base image, so the interpreter path matches).
FROM ${PYTHON_IMAGE} AS build
# Another package index than PyPI, and a CA bundle for it (tools/image-check.sh passes the
# host's when a TLS-intercepting proxy sits in the way); the build stage alone sees them.
ARG INDEX_URL=
ARG CA_BUNDLE=
ENV PIP_DISABLE_PIP_VERSION_CHECK=1 \
    PIP_NO_CACHE_DIR=1 \
    PIP_ROOT_USER_ACTION=ignore
# mypyc's C needs a compiler and the headers of the interpreter that will import it. The
# python:3.x-slim images carry their own headers (under /usr/local/include) but no gcc, and
# Debian's python3-dev there would be the headers of another interpreter, Debian's python3;
# a base whose python is Debian's own (tools/image-check.sh builds on one) needs python3-dev.
# So python3-dev only when Python.h is missing for `python`, checked again once installed.
# Versions are not pinned (DL3008): the mirror drops a Debian version at its next point
# release, and these packages only compile; nothing of them reaches the runtime stage.
# hadolint ignore=DL3008
RUN include=$(python -c 'import sysconfig; print(sysconfig.get_path("include"))') \
    && if [ -f "$include/Python.h" ]; then headers=; else headers=python3-dev; fi \
    && apt-get update \
    && apt-get install --yes --no-install-recommends gcc libc6-dev ${headers:+"$headers"} \
    && rm -rf /var/lib/apt/lists/* \
    && test -f "$include/Python.h"
WORKDIR /src
# Each dependency layer depends on its lock file alone: editing the source reuses both, and
# a new runtime pin reuses the build tools. --only-binary: every pin has a wheel for Linux.
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
COPY pyproject.toml README.md ./
COPY webhook ./webhook
COPY tools/precompile.py ./tools/
# The wheel, with the mypyc hook enabled and without build isolation: the pinned build tools
# of /opt/build build it, not whatever an isolated build would fetch. mypyc writes its
# modules next to the sources it compiles; a .so that came with the context would be stale,
# so none is kept. Then three checks that fail the build:
# - the engine is imported from /opt/stszone, as a C extension (its path is printed; -P: not
#   from /src, where mypyc left its own copies and which `python -c` would put first);
# - precompile.py gives bytecode to the imported .py modules (the .so need none);
# - the server's command line starts.
RUN find webhook -name '*.so' -delete \
    && HATCH_BUILD_HOOK_ENABLE_MYPYC=1 /opt/build/bin/pip wheel \
        --no-deps --no-build-isolation --wheel-dir /wheels . \
    && /opt/build/bin/pip --python /opt/stszone/bin/python install \
        --no-compile --no-deps /wheels/stszone-*.whl \
    && /opt/stszone/bin/python -P -c 'import sys, webhook.rules.plan as m; print(m.__file__); \
        sys.exit(not (m.__file__.startswith("/opt/stszone/") and m.__file__.endswith(".so")))' \
    && /opt/stszone/bin/python -B tools/precompile.py --site-packages \
    && /opt/stszone/bin/stszone serve --help > /dev/null

# Runtime: no compiler, no pip, no build tools, no source tree; nothing is written at run time.
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
