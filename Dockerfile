# stszone admission webhook: slim, non-root, and happy on a read-only root filesystem.
#
#   docker build -t stszone:0.1.0 .
#   kind load docker-image stszone:0.1.0 --name stszone   # the tag deploy/ uses by default
#
# The Deployment in deploy/ runs it with runAsUser 65532, readOnlyRootFilesystem and the
# serving pair mounted at /etc/stszone/tls; tests/test_dockerfile.py keeps the two in step.

ARG PYTHON_IMAGE=python:3.12-slim-bookworm

# Build: a wheel from pyproject.toml, installed with its dependencies into a virtualenv that
# the runtime stage copies whole (same base image, so the interpreter path matches).
FROM ${PYTHON_IMAGE} AS build
ENV PIP_DISABLE_PIP_VERSION_CHECK=1 \
    PIP_NO_CACHE_DIR=1 \
    PIP_ROOT_USER_ACTION=ignore
WORKDIR /src
COPY pyproject.toml README.md ./
COPY webhook ./webhook
RUN python -m venv /opt/stszone \
    && /opt/stszone/bin/pip wheel --no-deps --wheel-dir /wheels . \
    && /opt/stszone/bin/pip install /wheels/stszone-*.whl \
    && /opt/stszone/bin/stszone serve --help > /dev/null

# Runtime: no compiler, no source tree, no pip cache; nothing is written at run time.
FROM ${PYTHON_IMAGE}
# The base image ships the standard library without bytecode; compile it once here, because
# at run time the root filesystem is read-only and every start would recompile it in memory.
RUN python -m compileall -q "$(python -c 'import sysconfig; print(sysconfig.get_path("stdlib"))')"
COPY --from=build /opt/stszone /opt/stszone
ENV PATH=/opt/stszone/bin:$PATH \
    PYTHONDONTWRITEBYTECODE=1 \
    PYTHONUNBUFFERED=1
# Numeric, so the kubelet can verify runAsNonRoot without an /etc/passwd entry.
USER 65532:65532
EXPOSE 8443
ENTRYPOINT ["stszone", "serve"]
