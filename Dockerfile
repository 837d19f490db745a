# The grader image, in the flavours the platforms need (./build.sh builds all three):
#
#   target grand-challenge (the default): evaluation:latest, evaluation:<version>
#   target grand-challenge-invoke:        evaluation:invoke, evaluation:<version>-invoke
#   target codabench:                     evaluation:codabench, evaluation:<version>-codabench
#   target conformance:                   evaluation:<version>-conformance (the grand-challenge flavour
#                                         with pytest beside it, for ./conformance.sh and ./lock.sh)
#
# Python comes from the base image's apt (Debian bookworm ships 3.11) into a venv; the package
# is installed non-editable; the phase in ground-truth/ is baked in at /opt/app/ground-truth
# (Grand-Challenge's phase tarball at /opt/ml/input/data/ground_truth takes precedence at run
# time; on CodaBench the phase comes with the reference data).
ARG BASE_IMAGE=debian:bookworm-slim

FROM ${BASE_IMAGE} AS python
RUN apt-get update \
 && DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends python3 python3-venv ca-certificates \
 && rm -rf /var/lib/apt/lists/*

# The runtime dependencies come from requirements.lock only, every file checked against its
# hash (pip install --require-hashes; ./lock.sh renews the lock, build.sh refuses a lock that
# pyproject's dependencies have moved away from), in a layer of their own: a change to the
# grader's code does not reinstall them. A TLS-intercepting proxy's CA bundle can be lent to
# pip as a build secret (never baked in).
FROM python AS build
RUN python3 -m venv /opt/app/venv
COPY requirements.lock /src/
RUN --mount=type=secret,id=pip_cert \
    if [ -s /run/secrets/pip_cert ]; then export PIP_CERT=/run/secrets/pip_cert; fi \
 && /opt/app/venv/bin/pip install --no-cache-dir --disable-pip-version-check --require-hashes --no-deps -r /src/requirements.lock
COPY pyproject.toml README.md /src/
COPY schemas /src/schemas
COPY evaluation /src/evaluation
# The grader itself without dependencies (its build backend, hatchling, only copies files),
# then pip check: the locked set satisfies every requirement of pyproject.toml (its upper
# bounds included). The last steps compile FISBe's,
# CellMap's and the segmentation suite's numba kernels into the (then read-only) install, so
# a run never spends seconds compiling.
RUN --mount=type=secret,id=pip_cert \
    if [ -s /run/secrets/pip_cert ]; then export PIP_CERT=/run/secrets/pip_cert; fi \
 && /opt/app/venv/bin/pip install --no-cache-dir --disable-pip-version-check --no-deps /src \
 && /opt/app/venv/bin/pip check --disable-pip-version-check \
 && /opt/app/venv/bin/pip uninstall -y -q pip \
 && find /opt/app/venv -depth \( -name tests -o -name __pycache__ \) -type d -path '*/site-packages/*' -exec rm -rf {} + \
 && /opt/app/venv/bin/python -m compileall -q /opt/app/venv/lib \
 && /opt/app/venv/bin/python -c "from evaluation import cli, suites; [suites.get(name) for name in suites.names()]" \
 && /opt/app/venv/bin/python -c "from evaluation.metrics import label_stats, lee_thinning; from evaluation.metrics.hausdorff import scans; lee_thinning.warm_up(); label_stats.warm_up(); scans.warm_up()" \
 && /opt/app/venv/bin/python -c "from evaluation.suites.cellmap import linear; linear.warm_up([bool, 'uint8', 'float32', 'float64'])" \
 && /opt/app/venv/bin/python -c "from evaluation.suites import segmentation; segmentation.warm_up_every_definition()"

FROM ${BASE_IMAGE} AS app
# The grader's user has a passwd entry, so that Grand-Challenge's runtime, which looks the
# image's USER up in /etc/passwd, gives it its own group and home instead of group 0.
RUN apt-get update \
 && DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends python3 \
 && rm -rf /var/lib/apt/lists/* /var/cache/apt/* /usr/share/doc/* /usr/share/man/* \
 && echo "grader:x:1000:1000:grader:/tmp:/usr/sbin/nologin" >> /etc/passwd \
 && echo "grader:x:1000:" >> /etc/group
COPY --from=build /opt/app/venv /opt/app/venv
ENV PATH=/opt/app/venv/bin:$PATH \
    PYTHONUNBUFFERED=1 \
    PYTHONDONTWRITEBYTECODE=1 \
    HOME=/tmp \
    MPLCONFIGDIR=/tmp/matplotlib \
    TMPDIR=/tmp
# What every metrics.json names as its build (evaluation/provenance.py): the source commit
# (build.sh passes git's; the image has no .git) and the lock's digest. The baked phase's
# fingerprint (content hashes of its truth files) is computed once here, not at every run.
ARG SOURCE_COMMIT=unknown
COPY requirements.lock /opt/app/requirements.lock
RUN python -m evaluation.provenance stamp --commit "$SOURCE_COMMIT" --lock /opt/app/requirements.lock
COPY ground-truth /opt/app/ground-truth
RUN python -m evaluation fingerprint /opt/app/ground-truth >/dev/null

# The conformance kits (test/test_*_parity.py, mounted at /conformance/test with pyproject.toml)
# run inside the grader's own install: conformance.sh checks that a rebuild gives every value to
# the bit (container/conformance-digests.json) and ./lock.sh shows what a new lock moves. pytest
# lives beside the install (PYTHONPATH), never in it. (Before the platform flavours: the last
# stage, grand-challenge, stays the default target.)
FROM python AS conformance-tools
RUN --mount=type=secret,id=pip_cert \
    if [ -s /run/secrets/pip_cert ]; then export PIP_CERT=/run/secrets/pip_cert; fi \
 && python3 -m venv /tmp/tools && /tmp/tools/bin/pip install --no-cache-dir --disable-pip-version-check --target /opt/pytest pytest==9.2.0 pytest-timeout==2.4.0

FROM app AS conformance
COPY --from=conformance-tools /opt/pytest /opt/pytest
ENV PYTHONPATH=/opt/pytest
WORKDIR /conformance
CMD ["python", "-m", "pytest", "-q", "-p", "no:cacheprovider", "test/test_cellmap_parity.py", "test/test_fisbe_parity.py", "test/test_multiclass_parity.py", "test/test_annotators_parity.py", "test/test_segmentation_parity.py", "test/test_tomo_foam_parity.py"]

# CodaBench's compute worker (codalab/codabench compute_worker/compute_worker.py,
# Run._run_program_directory) passes the scoring program's metadata.yaml command as the
# container's CMD and keeps the image's ENTRYPOINT, so this flavour has none: the command
# (python3 -m evaluation --platform codabench ...) runs as written, with the venv's python3
# first on PATH. The worker runs the image's own user and creates /app/output as root with
# mode 0755, dropping DAC_OVERRIDE: only root can write there, so this flavour runs as root.
FROM app AS codabench
USER root
WORKDIR /app/program
CMD ["python3", "-m", "evaluation", "--platform", "codabench", "--input", "/app/input", "--output", "/app/output"]

# Grand-Challenge's invoke API (rse-grand-challenge components/tasks.py reads the label;
# sagemaker-shim starts the image once as a server on port 4743 and calls /health, then
# /invoke per evaluation): the same grader behind `python -m evaluation serve`. Built from the
# exec flavour below it, so the two differ only in this label and entrypoint.
FROM app AS grand-challenge-invoke
USER 1000:1000
WORKDIR /tmp
LABEL org.grand-challenge.api-method="invoke"
EXPOSE 4743
ENTRYPOINT ["/opt/app/venv/bin/python", "-m", "evaluation", "serve"]

# Grand-Challenge refuses images whose user is root; its runtime starts the image's own
# ENTRYPOINT and CMD as the image's user (sagemaker-shim). Without the api-method label an
# image is run once per evaluation (exec), which is the default; this stays the last stage,
# so a plain build gives it.
FROM app AS grand-challenge
USER 1000:1000
WORKDIR /tmp
ENTRYPOINT ["/opt/app/venv/bin/python", "-m", "evaluation"]
