#!/usr/bin/env bash
# Write each flavour as the single-image gzipped docker-archive the platforms accept:
#
#   ./export.sh                    -> evaluation-<version>.tar.gz            (Grand-Challenge: upload it
#                                     as the phase's evaluation method)
#                                     evaluation-invoke-<version>.tar.gz     (the same for Grand-Challenge's
#                                     invoke API: upload this one instead if you want it)
#                                     evaluation-codabench-<version>.tar.gz  (CodaBench: docker load it,
#                                     push it to a public registry, name it as the competition's image)
#   ./export.sh --ground-truth     -> also ground-truth[-<phase>]-<version>.tar.gz: the phase folder as
#                                     the tarball a Grand-Challenge phase takes (extracted at
#                                     /opt/ml/input/data/ground_truth, where it overrides the baked
#                                     copy), written by container/ground_truth_tarball.py: links to
#                                     files inside the phase stored as files, anything the
#                                     platform's extraction refuses refused here, the phase's name
#                                     inside (Grand-Challenge refuses a tarball it already has)
#   ./export.sh --public-phase     -> also public-phase[-<phase>]-<version>.tar.gz: the phase's public copy
#                                     (python -m evaluation publish, run by the exported image), for
#                                     participants' preflight (python -m evaluation check)
# The options combine (./export.sh --ground-truth --public-phase).
# Build first (./build.sh). OUTPUT_DIR sets where the files go (default: this folder);
# PHASE_DIR the phase folder (default: ground-truth), PHASE_NAME its name (default: the folder's);
# GZIP_LEVEL the archives' compression (default 6; 1 is about three times faster, 10 % larger).
set -euo pipefail
cd "$(dirname "$0")"
. container/engine.sh
for option in "$@"; do
  case "$option" in --ground-truth|--public-phase) ;; *) echo "unknown option $option (--ground-truth, --public-phase)" >&2; exit 1 ;; esac
done
engine=$(pick_engine)
out=${OUTPUT_DIR:-.}
mkdir -p "$out"
version=$(project_version)

save() {  # save TAG ARCHIVE
  "$engine" image inspect "$1" >/dev/null || { echo "no image $1: run ./build.sh first" >&2; exit 1; }
  if [ "$engine" = podman ]; then
    podman save --format docker-archive "$1" | gzip "-${GZIP_LEVEL:-6}" -c > "$2.partial"
  else
    docker save "$1" | gzip "-${GZIP_LEVEL:-6}" -c > "$2.partial"
  fi
  mv "$2.partial" "$2"
  images=$(gzip -dc "$2" | tar -xOf - manifest.json | grep -o '"Config"' | wc -l)
  [ "$images" = 1 ] || { echo "FAIL: $2 holds $images images; the platforms want exactly one" >&2; exit 1; }
  echo "wrote $2 ($(( $(stat -c %s "$2") / 1000000 )) MB, 1 image, $1)"
}

save "$IMAGE_TAG" "$out/${IMAGE_NAME}-${version}.tar.gz"
save "$INVOKE_TAG" "$out/${IMAGE_NAME}-invoke-${version}.tar.gz"
save "$CODABENCH_TAG" "$out/${IMAGE_NAME}-codabench-${version}.tar.gz"

phase_dir=${PHASE_DIR:-ground-truth}
phase_name=${PHASE_NAME:-$(basename "$(cd "$phase_dir" && pwd)")}
suffix="${version}.tar.gz"
[ "$phase_name" = ground-truth ] || suffix="${phase_name}-${version}.tar.gz"
for option in "$@"; do
  case "$option" in
    --ground-truth)
      tarball="$out/ground-truth-${suffix}"
      python3 container/ground_truth_tarball.py "$phase_dir" "$tarball" --phase "$phase_name"
      echo "upload $tarball as the phase's ground truth"
      ;;
    --public-phase)
      # publish inside the image (its grader, no write access to the phase), the result streamed out as a tarball
      public="$out/public-phase-${suffix}"
      "$engine" run --rm --network none --entrypoint sh -v "$(cd "$phase_dir" && pwd):/phase:ro" "$IMAGE_TAG" \
        -c 'python -m evaluation publish /phase --output /tmp/public >&2 && tar -czf - -C /tmp/public .' > "$public.partial"
      mv "$public.partial" "$public"
      echo "wrote $public: give it to participants for python -m evaluation check --phase"
      ;;
  esac
done
