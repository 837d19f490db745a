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
#   evaluation:<version>-conformance                        the Grand-Challenge flavour with pytest beside it, to
#                                                           run the conformance kits inside it (built with
#                                                           BUILD_CONFORMANCE=1, as ./conformance.sh and ./lock.sh do)
#
# Dependencies are installed from requirements.lock only, with their hashes; the build is
# refused when pyproject.toml's dependencies changed since the lock was made (renew it:
# ./lock.sh). The source commit (git's, "+dirty" with uncommitted changes) is baked in for
# the results' provenance.
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
python3 container/lock.py check || { echo "build.sh: refusing to build from an unlocked dependency set" >&2; exit 1; }

commit=$(git rev-parse HEAD 2>/dev/null || echo unknown)
[ "$commit" != unknown ] && [ -n "$(git status --porcelain 2>/dev/null)" ] && commit="$commit+dirty"
args=(--platform linux/amd64 --build-arg "SOURCE_COMMIT=$commit")
[ -n "${BASE_IMAGE:-}" ] && args+=(--build-arg "BASE_IMAGE=$BASE_IMAGE")
if [ -n "${PIP_CERT:-}" ] && [ -f "$PIP_CERT" ]; then args+=(--secret "id=pip_cert,src=$PIP_CERT"); fi
if [ "$engine" = podman ]; then args+=(--network host); fi
export DOCKER_BUILDKIT=1

started=$(date +%s)
"$engine" build "${args[@]}" --target grand-challenge --tag "$IMAGE_TAG" --tag "${IMAGE_NAME}:latest" "$@" .
"$engine" build "${args[@]}" --target grand-challenge-invoke --tag "$INVOKE_TAG" --tag "${IMAGE_NAME}:invoke" "$@" .
"$engine" build "${args[@]}" --target codabench --tag "$CODABENCH_TAG" --tag "${IMAGE_NAME}:codabench" "$@" .
if [ -n "${BUILD_CONFORMANCE:-}" ]; then  # conformance.sh and lock.sh ask for it
  "$engine" build "${args[@]}" --target conformance --tag "$CONFORMANCE_TAG" "$@" . >/dev/null
fi
for tag in "$IMAGE_TAG" "$INVOKE_TAG" "$CODABENCH_TAG"; do
  size=$("$engine" image inspect --format '{{.Size}}' "$tag")
  echo "built $tag with $engine; image size $(( size / 1000000 )) MB"
done
echo "build.sh: $(( $(date +%s) - started )) s"
