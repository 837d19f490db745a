#!/usr/bin/env bash
# requirements.lock: the image's runtime dependencies, pinned with hashes (container/lock.py).
#
#   ./lock.sh              renew: resolve pyproject.toml's dependencies afresh (pip-tools'
#                          pip-compile --generate-hashes, inside the image's base with its
#                          Python), build the image from the new lock, run the conformance kits
#                          inside the image before and after, and show every value that moved
#                          (lock-renewal/changelog.html, .csv, .json); exit 1 if one did or a
#                          kit failed. container/conformance-digests.json is rewritten for the
#                          new lock (commit it with the lock once the changes are understood).
#   ./lock.sh --resolve    only resolve and write requirements.lock (no build, no kits)
#   ./lock.sh --check      exit 1 unless requirements.lock was made from pyproject's current
#                          dependencies (./build.sh runs this and refuses to build otherwise)
#
# Environment: as build.sh (CONTAINER_ENGINE, IMAGE_NAME, BASE_IMAGE, PIP_CERT).
set -euo pipefail
cd "$(dirname "$0")"
. container/engine.sh

[ "${1:-}" = "--check" ] && exec python3 container/lock.py check
engine=$(pick_engine)
base=${BASE_IMAGE:-debian:bookworm-slim}
here=$(pwd)
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

resolve() {  # resolve TARGET: pip-compile pyproject's dependencies inside the base image
  python3 container/lock.py requirements > "$work/requirements.in"
  local cert=() network=()
  if [ -n "${PIP_CERT:-}" ] && [ -f "$PIP_CERT" ]; then cert=(-v "$PIP_CERT:/run/pip-cert:ro" -e PIP_CERT=/run/pip-cert); fi
  [ "$engine" = podman ] && network=(--network host)
  "$engine" run --rm "${network[@]}" "${cert[@]}" -v "$work:/lock" "$base" sh -ec '
    apt-get update -qq >/dev/null
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends python3 python3-venv ca-certificates >/dev/null
    python3 -m venv /tools && /tools/bin/pip install -q --disable-pip-version-check pip-tools==7.6.2
    cd /lock && /tools/bin/pip-compile -q --generate-hashes --allow-unsafe --strip-extras --no-emit-index-url \
      --output-file requirements.lock requirements.in'
  sed -i 's#pip-compile .*requirements.in#./lock.sh (pip-compile --generate-hashes on pyproject.toml'"'"'s dependencies)#; s#(via -r requirements.in)#(pyproject.toml)#; s#-r requirements.in#pyproject.toml#' "$work/requirements.lock"
  python3 container/lock.py stamp "$work/requirements.lock"
  cp "$work/requirements.lock" "$1"
  echo "resolved $(grep -c '==' "$1") pinned packages into $1"
}

if [ "${1:-}" = "--resolve" ]; then resolve requirements.lock; exit 0; fi

# Renewal: the kits in the image built from the current lock, then from the new one.
previous="${IMAGE_NAME}:lock-previous"
if ! "$engine" image exists "$CONFORMANCE_TAG" 2>/dev/null && ! "$engine" image inspect "$CONFORMANCE_TAG" >/dev/null 2>&1; then
  echo "no $CONFORMANCE_TAG yet: building the image from the current lock first"
  BUILD_CONFORMANCE=1 ./build.sh
fi
"$engine" tag "$CONFORMANCE_TAG" "$previous"
mkdir -p "$work/before" "$work/after"
run_conformance "$engine" "$previous" "$work/before" || echo "the kits failed in the image of the current lock (see above)"

resolve "$work/new.lock"
if cmp -s "$work/new.lock" requirements.lock; then
  echo "the lock did not change: nothing to renew"
  "$engine" rmi "$previous" >/dev/null
  exit 0
fi
cp requirements.lock "$work/old.lock"
cp "$work/new.lock" requirements.lock
diff <(python3 -c "import sys; sys.path.insert(0, 'container'); import lock; [print(k, v) for k, v in sorted(lock.pins(__import__('pathlib').Path(sys.argv[1])).items())]" "$work/old.lock") \
     <(python3 -c "import sys; sys.path.insert(0, 'container'); import lock; [print(k, v) for k, v in sorted(lock.pins(__import__('pathlib').Path(sys.argv[1])).items())]" requirements.lock) \
  | sed -n 's/^< /  was: /p; s/^> /  now: /p' || true

BUILD_CONFORMANCE=1 ./build.sh
status=0
run_conformance "$engine" "$CONFORMANCE_TAG" "$work/after" || { echo "FAIL: the kits fail in the image of the new lock (see above)"; status=1; }
python3 container/conformance.py digests "$work/after" > container/conformance-digests.json
rm -rf lock-renewal && mkdir -p lock-renewal
"$engine" run --rm --network none -v "$work/before:/before:ro" -v "$work/after:/after:ro" -v "$here/lock-renewal:/report" \
  --entrypoint /opt/app/venv/bin/python "$CONFORMANCE_TAG" -m evaluation compare /before /after --output /report --tolerance 0 \
  | tail -n 1
moved=$(python3 -c "import json; print(json.load(open('lock-renewal/changelog.json'))['summary']['values_moved'])")
# The moved values themselves (every one is in lock-renewal/changelog.csv):
python3 - <<'PY'
import csv
rows = [r for r in csv.DictReader(open("lock-renewal/changelog.csv")) if r["path"]]
for r in rows[:20]:
    print(f"  moved: {r['submission']} {r['case']}/{r['path']}: {r['old']} -> {r['new']} ({r['causes']})")
if len(rows) > 20:
    print(f"  ... and {len(rows) - 20} more")
PY
"$engine" rmi "$previous" >/dev/null || true
if [ "$moved" != 0 ]; then
  echo "FAIL: $moved value(s) moved with the new lock: lock-renewal/changelog.html lists them (lock-renewal/changelog.csv, .json)"
  status=1
fi
[ "$status" = 0 ] && echo "lock renewed: every conformance value is identical; commit requirements.lock and container/conformance-digests.json"
exit "$status"
