#!/usr/bin/env bash
# Write the image as the single gzipped docker-archive Grand-Challenge and CodaBench accept.
#
#   ./export.sh                    -> evaluation-<version>.tar.gz
#   ./export.sh --ground-truth     -> also ground-truth-<version>.tar.gz: the phase folder as the
#                                     tarball a Grand-Challenge phase takes (extracted at
#                                     /opt/ml/input/data/ground_truth, where it overrides the
#                                     baked copy)
# Build first (./build.sh). OUTPUT_DIR sets where the files go (default: this folder).
set -euo pipefail
cd "$(dirname "$0")"
. test/container/engine.sh
engine=$(pick_engine)
out=${OUTPUT_DIR:-.}
mkdir -p "$out"
version=$(project_version)
archive="$out/${IMAGE_NAME}-${version}.tar.gz"

"$engine" image inspect "$IMAGE_TAG" >/dev/null || { echo "no image $IMAGE_TAG: run ./build.sh first" >&2; exit 1; }
if [ "$engine" = podman ]; then
  podman save --format docker-archive "$IMAGE_TAG" | gzip -c > "$archive.partial"
else
  docker save "$IMAGE_TAG" | gzip -c > "$archive.partial"
fi
mv "$archive.partial" "$archive"
images=$(gzip -dc "$archive" | tar -xOf - manifest.json | grep -o '"Config"' | wc -l)
[ "$images" = 1 ] || { echo "FAIL: $archive holds $images images; the platforms want exactly one" >&2; exit 1; }
echo "wrote $archive ($(( $(stat -c %s "$archive") / 1000000 )) MB, 1 image, $IMAGE_TAG)"

if [ "${1:-}" = "--ground-truth" ]; then
  tarball="$out/ground-truth-${version}.tar.gz"
  tar -C ground-truth -czf "$tarball" .
  echo "wrote $tarball (upload it as the phase's ground truth)"
fi
