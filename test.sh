#!/usr/bin/env bash
# Dry run of the grader image as the platforms run it, before uploading it.
#
#   ./test.sh              build (./build.sh), then run every scenario
#   ./test.sh --no-build   use the image already built
#
# Each scenario runs the image with the platforms' restrictions: no network, read-only root
# file system with a tmpfs /tmp, all capabilities dropped, no privilege escalation, 7 GB of
# memory, a process limit, as the image's own non-root user, inputs mounted read-only. Then
# the produced files are checked inside the image: metrics.json must be valid against
# schemas/metrics.schema.json and equal the committed expected files in
# test/container/<scenario>/expected/. Any difference fails the run.
#
# Scenarios: baked (the example submission against the baked ground truth), codabench
# (input/ref + input/res -> scores.json), grand-challenge (predictions.json with two
# algorithm jobs and .mha outputs, ground truth as the phase tarball at
# /opt/ml/input/data/ground_truth), rejected (a zip with a path-traversal entry: exit 2).
set -euo pipefail
cd "$(dirname "$0")"
. test/container/engine.sh
engine=$(pick_engine)
[ "${1:-}" = "--no-build" ] || ./build.sh

user=$("$engine" image inspect --format '{{.Config.User}}' "$IMAGE_TAG")
case "${user%%:*}" in ""|root|0) echo "FAIL: the image runs as root ('$user'); Grand-Challenge refuses it" >&2; exit 1 ;; esac

work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
here=$(pwd)
failures=0

writable() {  # writable DIR TARGET: a volume option for a fresh output folder the image's user can write to
  mkdir -p "$1"
  if [ "$engine" = podman ]; then echo "$1:$2:U"; else chmod 1777 "$1"; echo "$1:$2"; fi
}

run_image() {  # run_image NAME EXPECTED_EXIT [engine run options...] -- [grader arguments...]
  local name=$1 expected=$2; shift 2
  local options=() arguments=()
  while [ $# -gt 0 ] && [ "$1" != "--" ]; do options+=("$1"); shift; done
  [ $# -gt 0 ] && shift
  arguments=("$@")
  local started status
  started=$(date +%s%N)
  set +e
  "$engine" run --rm --network none --read-only --tmpfs /tmp:rw,exec --cap-drop ALL \
    --security-opt no-new-privileges --memory 7g --pids-limit 512 \
    "${options[@]}" "$IMAGE_TAG" "${arguments[@]}" >"$work/$name.stdout" 2>"$work/$name.stderr"
  status=$?
  set -e
  echo "$name: exit $status (expected $expected) in $(( ($(date +%s%N) - started) / 1000000 )) ms"
  if [ "$status" != "$expected" ]; then
    echo "FAIL: $name exited $status; stderr tail:" >&2
    tail -n 5 "$work/$name.stderr" >&2
    failures=$((failures + 1))
    return 1
  fi
}

check_outputs() {  # check_outputs NAME OUTPUT_FOLDER
  if ! "$engine" run --rm --network none --read-only --entrypoint /opt/app/venv/bin/python \
      -v "$2:/produced:ro" -v "$here/test/container:/checks:ro" "$IMAGE_TAG" \
      /checks/check.py /produced "/checks/$1/expected"; then
    echo "FAIL: $1: outputs differ from test/container/$1/expected" >&2
    failures=$((failures + 1))
  fi
}

# baked: the bundled example submission against the ground truth baked into the image
run_image baked 0 -v "$here/test/example-submission:/input:ro" -v "$(writable "$work/baked" /output)" -- \
  && check_outputs baked "$work/baked"

# codabench: reference data (the phase) and the submission with the worker's metadata file
mkdir -p "$work/app/input"
cp -r ground-truth "$work/app/input/ref"
cp -r test/example-submission "$work/app/input/res"
printf 'submitted-by: example\n' > "$work/app/input/res/metadata"
run_image codabench 0 -v "$work/app/input:/app/input:ro" -v "$(writable "$work/codabench" /app/output)" -- \
  --input /app/input --output /app/output \
  && check_outputs codabench "$work/codabench"

# grand-challenge: two algorithm jobs with .mha outputs; the phase comes as the tarball location
if [ -d test/container/grand-challenge/input ]; then
  run_image grand-challenge 0 -v "$here/test/container/grand-challenge/input:/input:ro" \
    -v "$here/test/container/grand-challenge/ground-truth:/opt/ml/input/data/ground_truth:ro" \
    -v "$(writable "$work/grand-challenge" /output)" -- \
    && check_outputs grand-challenge "$work/grand-challenge"
fi

# rejected: a zip whose entry would leave the unpack folder -> exit 2 and a clear last line
if run_image rejected 2 -v "$here/test/container/rejected/input:/input:ro" -v "$(writable "$work/rejected" /output)" --; then
  last=$(grep -v '^\s*$' "$work/rejected.stderr" | tail -n 1)
  echo "  last stderr line: $last"
  case "$last" in "Submission rejected: "*"outside"*) ;; *) echo "FAIL: unexpected last line" >&2; failures=$((failures + 1)) ;; esac
fi

size=$("$engine" image inspect --format '{{.Size}}' "$IMAGE_TAG")
echo "image $IMAGE_TAG: $(( size / 1000000 )) MB, user $user"
if [ "$failures" -gt 0 ]; then echo "test.sh: $failures failure(s)" >&2; exit 1; fi
echo "test.sh: all scenarios passed"
