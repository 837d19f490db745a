"""Run a command as a platform would cap it, and report what it used.

    python measured_run.py REPORT.json DATA_LIMIT_BYTES TIME_LIMIT_S -- COMMAND...

The command runs with ``RLIMIT_DATA`` = DATA_LIMIT_BYTES (or none: ``none``; Grand-Challenge limits every process
this way) in its own process group, which is killed when it runs past TIME_LIMIT_S. REPORT gets
``{"exit": ..., "seconds": ..., "peak_mb": ..., "timed_out": ...}``; ``peak_mb`` is the largest
resident set of the command and of every process it waited for (``wait4``'s ``ru_maxrss``),
measured from this small process so that no larger parent's high-water mark is inherited.
The command's stdout and stderr pass through; this script exits with the command's status.
"""

import json
import os
import resource
import signal
import subprocess
import sys
import time


def main() -> int:
    report, data_limit, time_limit = sys.argv[1], sys.argv[2], float(sys.argv[3])
    command = sys.argv[sys.argv.index("--") + 1 :]

    def cap() -> None:
        if data_limit != "none":
            resource.setrlimit(resource.RLIMIT_DATA, (int(data_limit), int(data_limit)))

    started = time.monotonic()
    process = subprocess.Popen(command, preexec_fn=cap, start_new_session=True)
    timed_out = False
    deadline = started + time_limit
    while True:
        pid, status, usage = os.wait4(process.pid, os.WNOHANG)
        if pid:
            break
        if time.monotonic() > deadline:
            timed_out = True
            os.killpg(process.pid, signal.SIGKILL)
            _, status, usage = os.wait4(process.pid, 0)
            break
        time.sleep(0.02)
    try:
        os.killpg(process.pid, signal.SIGKILL)  # workers the command left behind
    except ProcessLookupError:
        pass
    code = os.waitstatus_to_exitcode(status)
    with open(report, "w") as f:
        json.dump(
            {
                "exit": code,
                "seconds": round(time.monotonic() - started, 3),
                "peak_mb": usage.ru_maxrss // 1024,
                "timed_out": timed_out,
            },
            f,
        )
    return code if code >= 0 else 128 - code


if __name__ == "__main__":
    sys.exit(main())
