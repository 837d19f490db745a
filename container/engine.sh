# Shared by build.sh, test.sh and export.sh.

# docker when its daemon answers, else podman; CONTAINER_ENGINE overrides.
pick_engine() {
  if [ -n "${CONTAINER_ENGINE:-}" ]; then echo "$CONTAINER_ENGINE"; return 0; fi
  if command -v docker >/dev/null 2>&1 && docker info >/dev/null 2>&1; then echo docker; return 0; fi
  if command -v podman >/dev/null 2>&1; then echo podman; return 0; fi
  echo "no container engine: install docker (with a running daemon) or podman, or set CONTAINER_ENGINE" >&2
  return 1
}

project_version() { sed -n 's/^version = "\(.*\)"$/\1/p' pyproject.toml | head -n 1; }

IMAGE_NAME=${IMAGE_NAME:-evaluation}
# The Grand-Challenge flavours (Dockerfile targets grand-challenge and grand-challenge-invoke)
# and the CodaBench flavour.
IMAGE_TAG="${IMAGE_NAME}:$(project_version)"
CODABENCH_TAG="${IMAGE_NAME}:$(project_version)-codabench"
INVOKE_TAG="${IMAGE_NAME}:$(project_version)-invoke"
# The conformance kits inside the grader's install (Dockerfile target conformance): build.sh
# builds it when BUILD_CONFORMANCE is set, conformance.sh and lock.sh run it.
CONFORMANCE_TAG="${IMAGE_NAME}:$(project_version)-conformance"

# run_conformance ENGINE TAG DUMP: test/test_*_parity.py inside the image TAG, each grader
# run's metrics.json kept in DUMP (test/helpers/grading.py); the exit status is pytest's.
run_conformance() {
  mkdir -p "$3"
  "$1" run --rm --network none -v "$PWD/test:/conformance/test:ro" -v "$PWD/pyproject.toml:/conformance/pyproject.toml:ro" -v "$PWD/schemas:/conformance/schemas:ro" \
    -v "$3:/dump" -e EVALUATION_CONFORMANCE_DUMP=/dump "$2"
}
