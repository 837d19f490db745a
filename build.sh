#!/usr/bin/env bash
# Build the flavours of the grader image from the one Dockerfile:
#
#   evaluation:latest, evaluation:<version>                 Grand-Challenge (target grand-challenge):
#                                                           non-root user, ENTRYPOINT python -m evaluation
#   evaluation:invoke, evaluation:<version>-invoke          Grand-Challenge's invoke API (target
#                                                           grand-challenge-invoke): the same, labelled
#                                                           org.grand-challenge.api-method=invoke, serving
#                                                           /health and /invoke on port 4743
#   evaluation:codabench, evaluation:<version>-codabench    CodaBench (target codabench): no ENTRYPOINT
#                                                           (the scoring program's command is the CMD), root
#
#   ./build.sh [extra arguments for the engine's build command]
#
# Environment: CONTAINER_ENGINE (docker|podman; default: docker if its daemon answers, else
# podman), IMAGE_NAME (default evaluation), BASE_IMAGE (default in the Dockerfile:
# debian:bookworm-slim), PIP_CERT (a CA bundle lent to pip as a build secret when a
# TLS-intercepting proxy is in the way; never baked in).
set -euo pipefail
cd "$(dirname "$0")"
. container/engine.sh
engine=$(pick_engine)

args=(--platform linux/amd64)
[ -n "${BASE_IMAGE:-}" ] && args+=(--build-arg "BASE_IMAGE=$BASE_IMAGE")
if [ -n "${PIP_CERT:-}" ] && [ -f "$PIP_CERT" ]; then args+=(--secret "id=pip_cert,src=$PIP_CERT"); fi
if [ "$engine" = podman ]; then args+=(--network host); fi
export DOCKER_BUILDKIT=1

started=$(date +%s)
"$engine" build "${args[@]}" --target grand-challenge --tag "$IMAGE_TAG" --tag "${IMAGE_NAME}:latest" "$@" .
"$engine" build "${args[@]}" --target grand-challenge-invoke --tag "$INVOKE_TAG" --tag "${IMAGE_NAME}:invoke" "$@" .
"$engine" build "${args[@]}" --target codabench --tag "$CODABENCH_TAG" --tag "${IMAGE_NAME}:codabench" "$@" .
for tag in "$IMAGE_TAG" "$INVOKE_TAG" "$CODABENCH_TAG"; do
  size=$("$engine" image inspect --format '{{.Size}}' "$tag")
  echo "built $tag with $engine; image size $(( size / 1000000 )) MB"
done
echo "build.sh: $(( $(date +%s) - started )) s"
