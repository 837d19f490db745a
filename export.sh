#!/usr/bin/env bash
# Write each flavour as the single-image gzipped docker-archive the platforms accept:
#
#   ./export.sh                    -> evaluation-<version>.tar.gz            (Grand-Challenge: upload it
#                                     as the phase's evaluation method)
#                                     evaluation-codabench-<version>.tar.gz  (CodaBench: docker load it,
#                                     push it to a public registry, name it as the competition's image)
#   ./export.sh --ground-truth     -> also ground-truth-<version>.tar.gz: the phase folder as the
#                                     tarball a Grand-Challenge phase takes (extracted at
#                                     /opt/ml/input/data/ground_truth, where it overrides the
#                                     baked copy)
# Build first (./build.sh). OUTPUT_DIR sets where the files go (default: this folder).
set -euo pipefail
cd "$(dirname "$0")"
. container/engine.sh
engine=$(pick_engine)
out=${OUTPUT_DIR:-.}
mkdir -p "$out"
version=$(project_version)

save() {  # save TAG ARCHIVE
  "$engine" image inspect "$1" >/dev/null || { echo "no image $1: run ./build.sh first" >&2; exit 1; }
  if [ "$engine" = podman ]; then
    podman save --format docker-archive "$1" | gzip -c > "$2.partial"
  else
    docker save "$1" | gzip -c > "$2.partial"
  fi
  mv "$2.partial" "$2"
  images=$(gzip -dc "$2" | tar -xOf - manifest.json | grep -o '"Config"' | wc -l)
  [ "$images" = 1 ] || { echo "FAIL: $2 holds $images images; the platforms want exactly one" >&2; exit 1; }
  echo "wrote $2 ($(( $(stat -c %s "$2") / 1000000 )) MB, 1 image, $1)"
}

save "$IMAGE_TAG" "$out/${IMAGE_NAME}-${version}.tar.gz"
save "$CODABENCH_TAG" "$out/${IMAGE_NAME}-codabench-${version}.tar.gz"

if [ "${1:-}" = "--ground-truth" ]; then
  tarball="$out/ground-truth-${version}.tar.gz"
  tar -C ground-truth -czf "$tarball" .
  echo "wrote $tarball (upload it as the phase's ground truth)"
fi
