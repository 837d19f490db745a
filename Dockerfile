# The grader image, in the flavours the platforms need (./build.sh builds all three):
#
#   target grand-challenge (the default): evaluation:latest, evaluation:<version>
#   target grand-challenge-invoke:        evaluation:invoke, evaluation:<version>-invoke
#   target codabench:                     evaluation:codabench, evaluation:<version>-codabench
#
# Python comes from the base image's apt (Debian bookworm ships 3.11) into a venv; the package
# is installed non-editable; the phase in ground-truth/ is baked in at /opt/app/ground-truth
# (Grand-Challenge's phase tarball at /opt/ml/input/data/ground_truth takes precedence at run
# time; on CodaBench the phase comes with the reference data).
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
# The last steps compile FISBe's, CellMap's and the segmentation suite's numba kernels into the
# (then read-only) install, so a run never spends seconds compiling.
RUN --mount=type=secret,id=pip_cert \
    if [ -s /run/secrets/pip_cert ]; then export PIP_CERT=/run/secrets/pip_cert; fi \
 && /opt/app/venv/bin/pip install --no-cache-dir --disable-pip-version-check /src \
 && /opt/app/venv/bin/pip uninstall -y -q pip \
 && find /opt/app/venv -depth \( -name tests -o -name __pycache__ \) -type d -path '*/site-packages/*' -exec rm -rf {} + \
 && /opt/app/venv/bin/python -m compileall -q /opt/app/venv/lib \
 && /opt/app/venv/bin/python -c "from evaluation import cli, suites; [suites.get(name) for name in suites.names()]" \
 && /opt/app/venv/bin/python -c "from evaluation.metrics import hausdorff, label_stats, lee_thinning; lee_thinning.warm_up(); label_stats.warm_up(); hausdorff.warm_up()" \
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
COPY ground-truth /opt/app/ground-truth
ENV PATH=/opt/app/venv/bin:$PATH \
    PYTHONUNBUFFERED=1 \
    PYTHONDONTWRITEBYTECODE=1 \
    HOME=/tmp \
    MPLCONFIGDIR=/tmp/matplotlib \
    TMPDIR=/tmp

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
