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
