#!/usr/bin/env bash
# The conformance kits inside the image: every parity test (test/test_*_parity.py) runs on the
# grader as installed in the image from requirements.lock, and every grader run's numbers must
# be identical to the bit to those recorded when the lock was last renewed
# (container/conformance-digests.json; ./lock.sh rewrites it).
#
#   ./conformance.sh                       build (./build.sh), then run the kits
#   ./conformance.sh --no-build            use the image already built (IMAGE_NAME as for build.sh)
#   ./conformance.sh --no-build --record   write container/conformance-digests.json from this run
#                                          (a new kit; ./lock.sh records them when it renews the lock)
set -euo pipefail
cd "$(dirname "$0")"
. container/engine.sh
engine=$(pick_engine)
[ "${1:-}" = "--no-build" ] || BUILD_CONFORMANCE=1 ./build.sh
# CONFORMANCE_DUMP=DIR keeps every run's metrics.json there (for python -m evaluation compare).
dump=${CONFORMANCE_DUMP:-$(mktemp -d)}
[ -n "${CONFORMANCE_DUMP:-}" ] || trap 'rm -rf "$dump"' EXIT
started=$(date +%s)
status=0
run_conformance "$engine" "$CONFORMANCE_TAG" "$dump" | tail -n 3 || status=1
if [ "${2:-}" = "--record" ]; then
  python3 container/conformance.py digests "$dump" > container/conformance-digests.json
  echo "recorded $(grep -c '": "' container/conformance-digests.json) runs' digests in container/conformance-digests.json"
else
  python3 container/conformance.py check "$dump" container/conformance-digests.json || status=1
fi
echo "conformance.sh: $(( $(date +%s) - started )) s"
exit "$status"
