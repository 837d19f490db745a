#!/usr/bin/env bash
# The grader images as the platforms really start them, before uploading them.
#
#   ./test.sh              build (./build.sh), then run every scenario
#   ./test.sh --no-build   use the images already built
#   TEST_ONLY=a,b ./test.sh --no-build   only the scenarios named (e.g. on images loaded from export.sh's archives)
#
# Scenarios (each checks the exit status and compares the outputs, inside the image, with
# container/scenarios/<scenario>/expected/; metrics.json must also be schema-valid; the
# Grand-Challenge ones also what the platform would show: status, badge, error message):
#
#   codabench                        the CodaBench compute worker's scoring step (evaluation:codabench)
#   codabench-bare                   the same mounts, the command without --platform
#   codabench-link                   res/submission.zarr a link to the reference data: exit 2
#   codabench-private                publish_cases: false: no case in any file CodaBench can publish
#   grand-challenge-jobs             Grand-Challenge's runtime on an algorithm phase (evaluation:latest)
#   grand-challenge-upload           ... on a prediction-file phase, upload and ground-truth tarball
#                                    both made with a wrapping folder
#   grand-challenge-nested           ... the upload a zip holding one zip
#   grand-challenge-additional       ... an additional evaluation input and three extra outputs
#   grand-challenge-linked-phase     ... a ground-truth tarball holding a link that leaves it
#   grand-challenge-cgroup           ... a cgroup memory limit and no RLIMIT_DATA
#   grand-challenge-rejected         ... an unusable upload: the participant's line is shown
#   grand-challenge-invoke(-rejected) the invoke flavour (evaluation:invoke) as the shim drives it
#   grand-challenge-deadline, codabench-deadline  a run time limit shorter than the work: the
#                                    grader ends before the platform's clock, with the line saying so
#   hardened                         the baked example under every restriction a platform may add
#   rejected                         a zip whose entry leaves its folder: exit 2 and a clear last line
set -euo pipefail
cd "$(dirname "$0")"
. container/engine.sh
engine=$(pick_engine)
[ "${1:-}" = "--no-build" ] || ./build.sh

user=$("$engine" image inspect --format '{{.Config.User}}' "$IMAGE_TAG")
case "${user%%:*}" in ""|root|0) echo "FAIL: $IMAGE_TAG runs as root ('$user'); Grand-Challenge refuses it" >&2; exit 1 ;; esac

work=$(mktemp -d)
runtime="${IMAGE_NAME}-grand-challenge-runtime"  # per IMAGE_NAME: engineers sharing an engine do not remove each other's
trap 'rm -rf "$work"; "$engine" rmi -f "$runtime" "$runtime-invoke" >/dev/null 2>&1 || true' EXIT
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
  if [ -n "${TEST_ONLY:-}" ] && [[ ",$TEST_ONLY," != *",$name,"* ]]; then return 3; fi  # not asked for: no checks follow
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
codabench_folders() {  # codabench_folders NAME PHASE: the worker's folders, the example submission in res/
  local root="$work/$1"
  mkdir -p "$root/input/res" "$root/output" "$root/shared" "$root/data"
  chmod 0755 "$root/input" "$root/output"
  cp -r examples/codabench/scoring_program "$root/program"
  cp -r "$2" "$root/input/ref"
  python3 -c "import sys, zipfile; zipfile.ZipFile(sys.argv[1]).extractall(sys.argv[2])" \
    examples/cellmap/submission/submission.zip "$root/input/res"
  printf 'submitted-by: example\nexitCode: 0\n' > "$root/input/res/metadata"
}

codabench_run() {  # codabench_run NAME EXIT COMMAND...: the scoring step on the folders of NAME
  local name=$1 expected=$2 root="$work/$1" security=(--security-opt no-new-privileges); shift 2
  [ "$engine" = podman ] && security=(--security-opt label=disable)
  run "$name" "$expected" --name "scoring_${IMAGE_NAME}_$name" --workdir /app/program \
    --cap-drop AUDIT_WRITE,CHOWN,DAC_OVERRIDE,FOWNER,FSETID,KILL,MKNOD,NET_BIND_SERVICE,NET_RAW,SETFCAP,SETGID,SETPCAP,SETUID,SYS_CHROOT \
    "${security[@]}" -e PYTHONUNBUFFERED=1 -e http_proxy= -e https_proxy= \
    -v "$root/program:/app/program" -v "$root/output:/app/output" -v "$root/data:/app/data:ro" \
    -v "$root/shared:/app/shared" -v "$root/input:/app/input" \
    "$CODABENCH_TAG" "$@"
}

codabench() {  # codabench NAME COMMAND...: the example scored, outputs as CodaBench can store them
  local name=$1 root="$work/$1"; shift
  codabench_folders "$name" ground-truth
  codabench_run "$name" 0 "$@" || return 0
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

# A submission that is a link to the reference data (a code submission can write one): refused.
codabench_folders codabench-link ground-truth
rm -rf "$work/codabench-link/input/res/submission.zarr"
ln -s ../ref/truth.zarr "$work/codabench-link/input/res/submission.zarr"
if codabench_run codabench-link 2 "${metadata_tokens[@]}"; then
  case "$(last_line codabench-link)" in "Submission rejected: "*"symbolic link"*) ;; *) fail "codabench-link: unexpected last line" ;; esac
fi

# A hidden test set (publish_cases: false): no file CodaBench can publish names a case, even
# detailed_results.html, which a published competition shows to anyone.
mkdir -p "$work/private-phase" && cp -r ground-truth/. "$work/private-phase/" && echo "publish_cases: false" >> "$work/private-phase/phase.yaml"
codabench_folders codabench-private "$work/private-phase"
if codabench_run codabench-private 0 "${metadata_tokens[@]}"; then
  python3 - "$work/codabench-private/output" "$work/codabench-private/input/ref" <<'PY' || fail "codabench-private: a case reached a published file"
import sys
from pathlib import Path
output, ref = Path(sys.argv[1]), Path(sys.argv[2])
crops = {p.name for p in (ref / "truth.zarr").iterdir() if p.name.startswith("crop")}
for path in output.rglob("*"):
    if path.is_file():
        text = path.read_bytes().decode("latin-1")
        assert not any(crop in text for crop in crops), f"{path.name} names a case"
print(f"  no case name in {', '.join(sorted(p.name for p in output.iterdir()))}")
PY
fi

# --------------------------------------------------------------------------------------------
# Grand-Challenge: the image as its runtime starts it (container/grand-challenge-runtime: the
# platform's image rewrite and sagemaker-shim, played from their source, exec and invoke). The
# default evaluation instance: 2 vCPUs, 8 GB, RLIMIT_DATA 7168 MiB; no network. The runtime
# writes what the platform would store and show to /platform-result/result.json.
runtime_image() {  # runtime_image IMAGE TAG: the runtime layer over IMAGE, its label passed on
  local original label
  original() { "$engine" image inspect --format "{{json .Config.$1}}" "$2" | base64 -w0; }
  label=$("$engine" image inspect --format '{{index .Config.Labels "org.grand-challenge.api-method"}}' "$1")
  "$engine" build -q -t "$2" --build-arg "IMAGE=$1" --build-arg "API_METHOD=${label:-exec}" \
    --build-arg "ORIGINAL_USER=$("$engine" image inspect --format '{{.Config.User}}' "$1")" \
    --build-arg "ORIGINAL_ENTRYPOINT_B64J=$(original Entrypoint "$1")" \
    --build-arg "ORIGINAL_CMD_B64J=$(original Cmd "$1")" container/grand-challenge-runtime >/dev/null
}
runtime_image "$IMAGE_TAG" "$runtime"
runtime_image "$INVOKE_TAG" "$runtime-invoke"

grand_challenge() {  # grand_challenge NAME RUNTIME INPUT(folder or zip) TARBALL EXIT [VAR=VALUE ...]
  local name=$1 runtime=$2 input=$3 tarball=$4 expected=$5 variables=() assignment
  shift 5
  for assignment in "$@"; do variables+=(-e "$assignment"); done
  mkdir -p "$work/$name-output" "$work/$name-platform"
  run "$name" "$expected" --network none --cpus 2 --memory 8g "${ulimits[@]}" "${variables[@]}" \
    -e GRAND_CHALLENGE_COMPONENT_GROUND_TRUTH=/platform/ground-truth.tar.gz \
    -e EMULATION_INPUT="/platform/$(basename "$input")" -e EMULATION_RESULT=/platform-result/result.json \
    -v "$input:/platform/$(basename "$input"):ro" -v "$tarball:/platform/ground-truth.tar.gz:ro" \
    -v "$work/$name-output:/output" -v "$work/$name-platform:/platform-result" "$runtime"
}

shown() {  # shown NAME STATUS BADGE [ERROR]: what Grand-Challenge stores and shows for the run
  python3 - "$work/$1-platform/result.json" "$2" "$3" "${4:-}" <<'PY' || fail "$1: not shown as expected"
import json, sys
result, status, badge, error = json.load(open(sys.argv[1])), *sys.argv[2:]
print(f"  shown: {result['status']} ({result['badge']}){': ' + result['error'] if result.get('error') else ''}")
assert result["status"] == status and result["badge"] == badge, result
assert not error or result["error"] == error, result["error"]
PY
}

budget() {  # budget NAME SOURCE MAX_MB: the logged memory budget, sized by SOURCE, within MAX_MB
  python3 - "$work/$1.stdout" "$2" "$3" <<'PY' || fail "$1: the logged memory budget is not what the limits allow"
import json, sys
events = [json.loads(line) for line in open(sys.argv[1]) if line.startswith("{")]
last = next(e for e in reversed(events) if e.get("event") == "written")
assert last["memory_limited_by"] == sys.argv[2] and last["memory_budget_mb"] <= int(sys.argv[3]), last
print(f"  memory budget {last['memory_budget_mb']} MB ({last['memory_limited_by']}) for {last['workers']} workers; limits seen (MB): {last['limits_mb']}")
PY
}

rlimit=GRAND_CHALLENGE_COMPONENT_MAX_MEMORY_MB=7168
jobs="$scenarios/grand-challenge-jobs"
python3 container/ground_truth_tarball.py "$jobs/ground-truth" "$work/jobs-ground-truth.tar.gz" --phase jobs >/dev/null
if grand_challenge grand-challenge-jobs "$runtime" "$jobs/input" "$work/jobs-ground-truth.tar.gz" 0 "$rlimit"; then
  check_outputs grand-challenge-jobs "$work/grand-challenge-jobs-output" "$jobs/expected"
  shown grand-challenge-jobs Succeeded success
  budget grand-challenge-jobs rlimit_data 7168
fi

# The same cases uploaded as prediction files: a zip with a wrapping folder and macOS debris,
# a ground-truth tarball made with a wrapping folder (the grader looks through one).
python3 - "$jobs" "$work/upload.zip" "$work/nested.zip" <<'PY'
import json, sys, zipfile
from pathlib import Path
jobs, target, nested = Path(sys.argv[1]), sys.argv[2], sys.argv[3]
outputs = {}
for job in json.loads((jobs / "input" / "predictions.json").read_text()):
    case = next(i["image"]["name"] for i in job["inputs"] if i.get("image"))
    outputs[case] = next((jobs / "input" / job["pk"] / "output").rglob("*.mha"))
with zipfile.ZipFile(target, "w") as z:
    for case, output in outputs.items():
        z.write(output, f"my-predictions/{case}")
    z.writestr("__MACOSX/my-predictions/._case_a.mha", b"\0")
    z.writestr("my-predictions/.DS_Store", b"\0")
with zipfile.ZipFile(nested, "w") as z:  # a zip holding a zip: the shim extracts one level, the grader the rest
    inner = Path(nested).with_suffix(".inner")
    with zipfile.ZipFile(inner, "w") as flat:
        for case, output in outputs.items():
            flat.write(output, case)
    z.write(inner, "results/submission.zip")
PY
mkdir -p "$work/wrapped/phase" && cp -r "$jobs/ground-truth/." "$work/wrapped/phase/"
tar -C "$work/wrapped" -czf "$work/wrapped-ground-truth.tar.gz" phase
upload_expected="$scenarios/grand-challenge-upload/expected"
if grand_challenge grand-challenge-upload "$runtime" "$work/upload.zip" "$work/wrapped-ground-truth.tar.gz" 0 "$rlimit"; then
  check_outputs grand-challenge-upload "$work/grand-challenge-upload-output" "$upload_expected"
  shown grand-challenge-upload Succeeded success
fi
grand_challenge grand-challenge-nested "$runtime" "$work/nested.zip" "$work/jobs-ground-truth.tar.gz" 0 "$rlimit" \
  && check_outputs grand-challenge-nested "$work/grand-challenge-nested-output" "$upload_expected"

# A phase with additional evaluation inputs and outputs: an input value beside the nested
# upload (set aside, recorded in metrics.json), three outputs the platform reads back.
mkdir -p "$work/additional" && cp -r "$jobs/ground-truth/." "$work/additional/"
cat >> "$work/additional/phase.yaml" <<'YAML'
grand_challenge:
  additional_inputs: [algorithm-notes.json]
  additional_outputs: {leaderboard.json: leaderboard, cases.csv: case-scores, report.zip: report}
YAML
python3 container/ground_truth_tarball.py "$work/additional" "$work/additional.tar.gz" --phase additional >/dev/null
if grand_challenge grand-challenge-additional "$runtime" "$work/nested.zip" "$work/additional.tar.gz" 0 "$rlimit" \
    'EMULATION_ADDITIONAL_INPUTS={"algorithm-notes.json": {"external_data": true}}' \
    'EMULATION_OUTPUTS={"metrics.json": "Anything", "leaderboard.json": "Anything", "cases.csv": "CSV file", "report.zip": "ZIP file"}'; then
  shown grand-challenge-additional Succeeded success
  python3 - "$work/grand-challenge-additional-output" <<'PY' || fail "grand-challenge-additional: inputs or outputs not as declared"
import csv, json, sys
from pathlib import Path
out = Path(sys.argv[1])
metrics = json.loads((out / "metrics.json").read_text())
assert metrics["additional_inputs"] == {"algorithm-notes.json": {"value": {"external_data": True}}}, metrics.get("additional_inputs")
board = json.loads((out / "leaderboard.json").read_text())
assert board and all(value is None or isinstance(value, (int, float)) for value in board.values()), board
assert sorted(row["case"] for row in csv.DictReader(open(out / "cases.csv"))) == ["case_a", "case_b"]
PY
fi

# A phase folder holding a link that leaves it: archived as a link (plain tar), the shim's data
# filter refuses the tarball and the phase cannot run; ground_truth_tarball.py refuses to write it.
mkdir -p "$work/linked" && cp -r "$jobs/ground-truth/." "$work/linked/" && ln -s /etc/os-release "$work/linked/notes.txt"
tar -C "$work/linked" -czf "$work/linked.tar.gz" .
grand_challenge grand-challenge-linked-phase "$runtime" "$jobs/input" "$work/linked.tar.gz" 70 "$rlimit" \
  && shown grand-challenge-linked-phase Failed danger "The invocation request did not return a result"
python3 container/ground_truth_tarball.py "$work/linked" "$work/linked-refused.tar.gz" 2>/dev/null \
  && fail "ground_truth_tarball.py wrote a phase holding a link that leaves it"

# No RLIMIT_DATA, a cgroup limit only (whether shim 0.8 still sets RLIMIT_DATA is not
# published): the grader sizes its budget from the cgroup and says so.
grand_challenge grand-challenge-cgroup "$runtime" "$jobs/input" "$work/jobs-ground-truth.tar.gz" 0 \
  && budget grand-challenge-cgroup cgroup 8192

# An upload that cannot be scored (a case named after no test case): exit 2, and the line the
# participant is shown is the grader's last stderr line.
python3 - "$work/upload.zip" "$work/misnamed.zip" <<'PY'
import sys, zipfile
with zipfile.ZipFile(sys.argv[1]) as source, zipfile.ZipFile(sys.argv[2], "w") as target:
    for member in source.infolist():
        target.writestr(member.filename.replace("case_b", "case_x"), source.read(member))
PY
if grand_challenge grand-challenge-rejected "$runtime" "$work/misnamed.zip" "$work/jobs-ground-truth.tar.gz" 2 "$rlimit"; then
  shown grand-challenge-rejected Failed danger "$(last_line grand-challenge-rejected)"
  case "$(last_line grand-challenge-rejected)" in "Submission rejected: "*case_x*) ;; *) fail "grand-challenge-rejected: unexpected last line" ;; esac
fi

# The invoke API: the invoke flavour started once as a server, /health polled, /invoke called.
if grand_challenge grand-challenge-invoke "$runtime-invoke" "$jobs/input" "$work/jobs-ground-truth.tar.gz" 0 "$rlimit"; then
  check_outputs grand-challenge-invoke "$work/grand-challenge-invoke-output" "$jobs/expected"
  shown grand-challenge-invoke Succeeded success
fi
grand_challenge grand-challenge-invoke-rejected "$runtime-invoke" "$work/misnamed.zip" "$work/jobs-ground-truth.tar.gz" 1 "$rlimit" \
  && shown grand-challenge-invoke-rejected Failed danger "$(last_line grand-challenge-rejected)"  # shim 0.8.3: the user process's last error line

# A run time limit shorter than the work (10 s, less the 15 s kept for writing: nothing can
# start): the grader ends before the platform's clock does, with the line that says so, on
# Grand-Challenge (its runtime stopping the job at the phase's 10 s) and on CodaBench.
deadline_line="Evaluation stopped at the run's time limit of 10 s: 0 of "
mkdir -p "$work/deadline" && cp -r "$jobs/ground-truth/." "$work/deadline/" && echo "run_time_limit_s: 10" >> "$work/deadline/phase.yaml"
python3 container/ground_truth_tarball.py "$work/deadline" "$work/deadline.tar.gz" --phase deadline >/dev/null
if grand_challenge grand-challenge-deadline "$runtime" "$jobs/input" "$work/deadline.tar.gz" 1 "$rlimit" EMULATION_TIME_LIMIT=10; then
  case "$(last_line grand-challenge-deadline)" in "$deadline_line"*) ;; *) fail "grand-challenge-deadline: unexpected last line" ;; esac
  shown grand-challenge-deadline Failed danger "$(last_line grand-challenge-deadline)"
fi
mkdir -p "$work/deadline-cellmap" && cp -r ground-truth/. "$work/deadline-cellmap/" && echo "run_time_limit_s: 10" >> "$work/deadline-cellmap/phase.yaml"
codabench_folders codabench-deadline "$work/deadline-cellmap"
if codabench_run codabench-deadline 1 "${metadata_tokens[@]}"; then
  case "$(last_line codabench-deadline)" in "$deadline_line"*) ;; *) fail "codabench-deadline: unexpected last line" ;; esac
fi

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

for tag in "$IMAGE_TAG" "$INVOKE_TAG" "$CODABENCH_TAG"; do
  echo "image $tag: $(( $("$engine" image inspect --format '{{.Size}}' "$tag") / 1000000 )) MB, user '$("$engine" image inspect --format '{{.Config.User}}' "$tag")'"
done
if [ "$failures" -gt 0 ]; then echo "test.sh: $failures failure(s)" >&2; exit 1; fi
echo "test.sh: all scenarios passed"
