#!/usr/bin/env bash
# Build the grader image, tagged evaluation:<project version> (IMAGE_NAME overrides the name).
#
#   ./build.sh [extra arguments for the engine's build command]
#
# Environment: CONTAINER_ENGINE (docker|podman; default: docker if its daemon answers, else
# podman), BASE_IMAGE (default in the Dockerfile: debian:bookworm-slim), APP_UID (the
# image's user, default 1000; Grand-Challenge refuses root), PIP_CERT (a CA bundle lent to pip
# as a build secret when a TLS-intercepting proxy is in the way; never baked in).
set -euo pipefail
cd "$(dirname "$0")"
. test/container/engine.sh
engine=$(pick_engine)

args=(--platform linux/amd64 --tag "$IMAGE_TAG" --tag "${IMAGE_NAME}:latest")
[ -n "${BASE_IMAGE:-}" ] && args+=(--build-arg "BASE_IMAGE=$BASE_IMAGE")
[ -n "${APP_UID:-}" ] && args+=(--build-arg "APP_UID=$APP_UID")
if [ -n "${PIP_CERT:-}" ] && [ -f "$PIP_CERT" ]; then args+=(--secret "id=pip_cert,src=$PIP_CERT"); fi
if [ "$engine" = podman ]; then args+=(--network host); fi
export DOCKER_BUILDKIT=1

started=$(date +%s)
"$engine" build "${args[@]}" "$@" .
size=$("$engine" image inspect --format '{{.Size}}' "$IMAGE_TAG")
echo "built $IMAGE_TAG with $engine in $(( $(date +%s) - started )) s; image size $(( size / 1000000 )) MB"
