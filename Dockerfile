# The grader image: Grand-Challenge evaluation method / CodaBench scoring program.
#
#   ./build.sh                      (docker or podman; BASE_IMAGE=... to use another base)
#
# Python comes from the base image's apt (Debian bookworm ships 3.11) into a venv; the package
# is installed non-editable; the phase in ground-truth/ is baked in at /opt/app/ground-truth
# (Grand-Challenge's phase tarball at /opt/ml/input/data/ground_truth takes precedence at run
# time; on CodaBench the phase comes with the reference data). The image runs as a non-root
# user, as Grand-Challenge requires.
ARG BASE_IMAGE=debian:bookworm-slim

FROM ${BASE_IMAGE} AS build
RUN apt-get update \
 && DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends python3 python3-venv ca-certificates \
 && rm -rf /var/lib/apt/lists/*
RUN python3 -m venv /opt/app/venv
COPY pyproject.toml README.md /src/
COPY schemas /src/schemas
COPY evaluation /src/evaluation
# A TLS-intercepting proxy's CA bundle can be lent to pip as a build secret (never baked in).
# The last step compiles FISBe's numba kernels into the (then read-only) install, so a run
# never spends seconds compiling.
RUN --mount=type=secret,id=pip_cert \
    if [ -s /run/secrets/pip_cert ]; then export PIP_CERT=/run/secrets/pip_cert; fi \
 && /opt/app/venv/bin/pip install --no-cache-dir --disable-pip-version-check /src \
 && /opt/app/venv/bin/pip uninstall -y -q pip \
 && find /opt/app/venv -depth \( -name tests -o -name __pycache__ \) -type d -path '*/site-packages/*' -exec rm -rf {} + \
 && /opt/app/venv/bin/python -m compileall -q /opt/app/venv/lib \
 && /opt/app/venv/bin/python -c "from evaluation import cli, suites; [suites.get(name) for name in suites.names()]" \
 && /opt/app/venv/bin/python -c "from evaluation.metrics import lee_thinning; lee_thinning.warm_up()"

FROM ${BASE_IMAGE}
ARG APP_UID=1000
RUN apt-get update \
 && DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends python3 \
 && rm -rf /var/lib/apt/lists/* /var/cache/apt/* /usr/share/doc/* /usr/share/man/*
COPY --from=build /opt/app/venv /opt/app/venv
COPY ground-truth /opt/app/ground-truth
ENV PATH=/opt/app/venv/bin:$PATH \
    PYTHONUNBUFFERED=1 \
    PYTHONDONTWRITEBYTECODE=1 \
    HOME=/tmp \
    MPLCONFIGDIR=/tmp/matplotlib \
    TMPDIR=/tmp
USER ${APP_UID}:${APP_UID}
WORKDIR /tmp
ENTRYPOINT ["/opt/app/venv/bin/python", "-m", "evaluation"]
