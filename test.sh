#!/usr/bin/env bash
# The grader images as the platforms really start them, before uploading them.
#
#   ./test.sh              build (./build.sh), then run every scenario
#   ./test.sh --no-build   use the images already built
#
# Scenarios (each checks the exit status and compares the outputs, inside the image, with
# container/scenarios/<scenario>/expected/; metrics.json must also be schema-valid):
#
#   codabench               the CodaBench compute worker's scoring step (evaluation:codabench)
#   codabench-bare          the same mounts, the command without --platform
#   grand-challenge-jobs    Grand-Challenge's runtime on an algorithm phase (evaluation:latest)
#   grand-challenge-upload  Grand-Challenge's runtime on a prediction-file phase, upload and
#                           ground-truth tarball both made with a wrapping folder
#   hardened                the baked example under every restriction a platform may add
#   rejected                a zip whose entry leaves its folder: exit 2 and a clear last line
set -euo pipefail
cd "$(dirname "$0")"
. container/engine.sh
engine=$(pick_engine)
[ "${1:-}" = "--no-build" ] || ./build.sh

user=$("$engine" image inspect --format '{{.Config.User}}' "$IMAGE_TAG")
case "${user%%:*}" in ""|root|0) echo "FAIL: $IMAGE_TAG runs as root ('$user'); Grand-Challenge refuses it" >&2; exit 1 ;; esac

work=$(mktemp -d)
runtime="${IMAGE_NAME}-grand-challenge-runtime"  # per IMAGE_NAME: engineers sharing an engine do not remove each other's
trap 'rm -rf "$work"; "$engine" rmi -f "$runtime" >/dev/null 2>&1 || true' EXIT
here=$(pwd)
scenarios=$here/container/scenarios
failures=0
# podman on this machine kind: naming one --ulimit drops containers.conf's defaults (see
# .ci/podman-env.sh), so the runs that need a limit name these too.
nproc=$(ulimit -Hu); [ "$nproc" = unlimited ] || [ "$nproc" -gt 32768 ] && nproc=32768
ulimits=(--ulimit "nofile=$(ulimit -Hn):$(ulimit -Hn)" --ulimit "nproc=$nproc:$nproc")

fail() { echo "FAIL: $*" >&2; failures=$((failures + 1)); }

run() {  # run NAME EXPECTED_EXIT engine-run-arguments...: runs the container, keeps its stdout/stderr
  local name=$1 expected=$2 started status; shift 2
  started=$(date +%s%N)
  set +e
  "$engine" run --rm "$@" >"$work/$name.stdout" 2>"$work/$name.stderr"
  status=$?
  set -e
  echo "$name: exit $status (expected $expected) in $(( ($(date +%s%N) - started) / 1000000 )) ms"
  if [ "$status" != "$expected" ]; then
    fail "$name exited $status; stderr tail:"
    tail -n 5 "$work/$name.stderr" >&2
    return 1
  fi
}

check_outputs() {  # check_outputs NAME OUTPUT_FOLDER EXPECTED_FOLDER: schema and expected files, inside the image
  if ! "$engine" run --rm --network none --read-only --entrypoint /opt/app/venv/bin/python \
      -v "$2:/produced:ro" -v "$3:/expected:ro" -v "$here/container/check.py:/check.py:ro" "$IMAGE_TAG" \
      /check.py /produced /expected; then
    fail "$1: outputs differ from $3"
  fi
}

last_line() { grep -v '^\s*$' "$work/$1.stderr" | tail -n 1; }

# --------------------------------------------------------------------------------------------
# CodaBench: codalab/codabench compute_worker/compute_worker.py, Run._run_program_directory.
# The scoring program's metadata.yaml command, after replace_legacy_metadata_command's
# substitutions ($input -> /app/input, ...), split like a shell would (docker-py
# split_command) and passed as the CMD with the image's ENTRYPOINT kept; no --user (the
# image's user); working directory /app/program; 14 capabilities dropped, DAC_OVERRIDE among
# them; label=disable (podman); PYTHONUNBUFFERED=1 and empty proxy variables; no memory, CPU
# or network limits. The worker (root) creates the folders it mounts: /app/output is root's,
# mode 0755. res/ holds the extracted submission (no folder stripped) and the worker's
# metadata file.
codabench() {  # codabench NAME COMMAND...
  local name=$1 root="$work/$1"; shift
  mkdir -p "$root/input/res" "$root/output" "$root/shared" "$root/data"
  chmod 0755 "$root/input" "$root/output"
  cp -r examples/codabench/scoring_program "$root/program"
  cp -r ground-truth "$root/input/ref"
  python3 -c "import sys, zipfile; zipfile.ZipFile(sys.argv[1]).extractall(sys.argv[2])" \
    examples/cellmap/submission/submission.zip "$root/input/res"
  printf 'submitted-by: example\nexitCode: 0\n' > "$root/input/res/metadata"
  local security=(--security-opt no-new-privileges)
  [ "$engine" = podman ] && security=(--security-opt label=disable)
  run "$name" 0 --name "scoring_${IMAGE_NAME}_$name" --workdir /app/program \
    --cap-drop AUDIT_WRITE,CHOWN,DAC_OVERRIDE,FOWNER,FSETID,KILL,MKNOD,NET_BIND_SERVICE,NET_RAW,SETFCAP,SETGID,SETPCAP,SETUID,SYS_CHROOT \
    "${security[@]}" -e PYTHONUNBUFFERED=1 -e http_proxy= -e https_proxy= \
    -v "$root/program:/app/program" -v "$root/output:/app/output" -v "$root/data:/app/data:ro" \
    -v "$root/shared:/app/shared" -v "$root/input:/app/input" \
    "$CODABENCH_TAG" "$@" || return 0
  check_outputs "$name" "$root/output" "$scenarios/codabench/expected"
  [ -e "$root/output/metadata" ] && fail "$name: wrote output/metadata, which makes the worker fail the run"
  python3 - "$root/output/scores.json" <<'PY' || fail "$name: scores.json is not what CodaBench can store"
import json, math, sys
scores = json.load(open(sys.argv[1]))
assert isinstance(scores, dict) and scores, "not a non-empty object"
for key, value in scores.items():
    assert len(key) <= 36, f"key {key!r} is longer than a leaderboard column key (36)"
    assert isinstance(value, (int, float)) and math.isfinite(value) and abs(value) < 1e10, f"{key}: {value!r}"
PY
}

metadata_command=$(python3 - <<'PY'
import shlex, yaml
command = yaml.safe_load(open("examples/codabench/scoring_program/metadata.yaml"))["command"]
for old, new in (("$input", "/app/input"), ("$output", "/app/output"), ("$program", "/app/program"),
                 ("$hidden", "/app/input/ref"), ("$shared", "/app/shared"), ("$tmp", "/app/output"),
                 ("$predictions", "/app/input/res")):
    command = command.replace(old, new)
print("\n".join(shlex.split(command)))
PY
)
mapfile -t metadata_tokens <<<"$metadata_command"
codabench codabench "${metadata_tokens[@]}"
codabench codabench-bare python3 -m evaluation --input /app/input --output /app/output

# --------------------------------------------------------------------------------------------
# Grand-Challenge: the image as its runtime starts it (container/grand-challenge-runtime: the
# platform's image rewrite and sagemaker-shim, played from their source). The default
# evaluation instance: 2 vCPUs, 8 GB, RLIMIT_DATA 7168 MiB; no network.
original() { "$engine" image inspect --format "{{json .Config.$1}}" "$IMAGE_TAG" | base64 -w0; }
"$engine" build -q -t "$runtime" --build-arg "IMAGE=$IMAGE_TAG" \
  --build-arg "ORIGINAL_USER=$user" --build-arg "ORIGINAL_ENTRYPOINT_B64J=$(original Entrypoint)" \
  --build-arg "ORIGINAL_CMD_B64J=$(original Cmd)" container/grand-challenge-runtime >/dev/null

grand_challenge() {  # grand_challenge NAME INPUT(folder or zip) GROUND_TRUTH_TARBALL EXPECTED
  local name=$1 input=$2 tarball=$3 expected=$4 out="$work/$1-output"
  mkdir -p "$out"
  run "$name" 0 --network none --cpus 2 --memory 8g "${ulimits[@]}" \
    -e GRAND_CHALLENGE_COMPONENT_MAX_MEMORY_MB=7168 -e GRAND_CHALLENGE_COMPONENT_GROUND_TRUTH=/platform/ground-truth.tar.gz \
    -e EMULATION_INPUT="/platform/$(basename "$input")" \
    -v "$input:/platform/$(basename "$input"):ro" -v "$tarball:/platform/ground-truth.tar.gz:ro" -v "$out:/output" \
    "$runtime" || return 0
  check_outputs "$name" "$out" "$expected"
  python3 - "$work/$name.stderr" <<'PY' || fail "$name: the logged memory budget exceeds the 7 GiB RLIMIT_DATA"
import json, sys
events = [json.loads(line) for line in open(sys.argv[1]) if line.startswith("{")]
budget = next(e for e in events if e.get("event") == "resources")
assert budget["memory_budget_mb"] <= 7168 and budget["limits_mb"]["rlimit_data"] == 7168, budget
print(f"  memory budget {budget['memory_budget_mb']} MB for {budget['workers']} workers; limits seen (MB): {budget['limits_mb']}")
PY
}

jobs="$scenarios/grand-challenge-jobs"
tar -C "$jobs/ground-truth" -czf "$work/jobs-ground-truth.tar.gz" .
grand_challenge grand-challenge-jobs "$jobs/input" "$work/jobs-ground-truth.tar.gz" "$jobs/expected"

# The same cases uploaded as prediction files: a zip with a wrapping folder and macOS debris,
# a ground-truth tarball made with a wrapping folder (the grader looks through one).
python3 - "$jobs" "$work/upload.zip" <<'PY'
import json, sys, zipfile
from pathlib import Path
jobs, target = Path(sys.argv[1]), sys.argv[2]
with zipfile.ZipFile(target, "w") as z:
    for job in json.loads((jobs / "input" / "predictions.json").read_text()):
        case = next(i["image"]["name"] for i in job["inputs"] if i.get("image"))
        output = next((jobs / "input" / job["pk"] / "output").rglob("*.mha"))
        z.write(output, f"my-predictions/{case}")
    z.writestr("__MACOSX/my-predictions/._case_a.mha", b"\0")
    z.writestr("my-predictions/.DS_Store", b"\0")
PY
mkdir -p "$work/wrapped/phase" && cp -r "$jobs/ground-truth/." "$work/wrapped/phase/"
tar -C "$work/wrapped" -czf "$work/wrapped-ground-truth.tar.gz" phase
grand_challenge grand-challenge-upload "$work/upload.zip" "$work/wrapped-ground-truth.tar.gz" "$scenarios/grand-challenge-upload/expected"

# --------------------------------------------------------------------------------------------
# Every restriction a platform may add: no network, read-only root with a tmpfs /tmp, all
# capabilities dropped, no privilege escalation, 7 GB, a process limit, inputs read-only.
writable() {  # writable DIR TARGET: a volume option for a fresh output folder the image's user can write to
  mkdir -p "$1"
  if [ "$engine" = podman ]; then echo "$1:$2:U"; else chmod 1777 "$1"; echo "$1:$2"; fi
}
hardened=(--network none --read-only --tmpfs /tmp:rw,exec --cap-drop ALL --security-opt no-new-privileges
          --memory 7g --pids-limit 512)
run hardened 0 "${hardened[@]}" -v "$here/examples/cellmap/submission:/input:ro" -v "$(writable "$work/hardened" /output)" "$IMAGE_TAG" \
  && check_outputs hardened "$work/hardened" "$scenarios/baked/expected"

if run rejected 2 "${hardened[@]}" -v "$scenarios/rejected/input:/input:ro" -v "$(writable "$work/rejected" /output)" "$IMAGE_TAG"; then
  echo "  last stderr line: $(last_line rejected)"
  case "$(last_line rejected)" in "Submission rejected: "*"outside"*) ;; *) fail "rejected: unexpected last line" ;; esac
fi

for tag in "$IMAGE_TAG" "$CODABENCH_TAG"; do
  echo "image $tag: $(( $("$engine" image inspect --format '{{.Size}}' "$tag") / 1000000 )) MB, user '$("$engine" image inspect --format '{{.Config.User}}' "$tag")'"
done
if [ "$failures" -gt 0 ]; then echo "test.sh: $failures failure(s)" >&2; exit 1; fi
echo "test.sh: all scenarios passed"
