"""What this process may use and has used: CPUs, memory limits, resident memory.

Read from the process itself, never from platform variables: Grand-Challenge's runtime removes
every ``GRAND_CHALLENGE_*`` variable and limits each process with ``RLIMIT_DATA`` instead
(rse-sagemaker-shim, ``sagemaker_shim/cli.py``: ``set_memory_limits``); CodaBench's worker and
docker/podman limit the container's cgroup.
"""

import os
import resource


def running_seconds() -> float:
    """How long this process has run (its start in /proc/self/stat against the system's
    uptime): the platform's clock started with it, not with the first line of Python."""
    try:
        ticks = int(open("/proc/self/stat").read().rsplit(")", 1)[1].split()[19])
        uptime = float(open("/proc/uptime").read().split()[0])
        return max(0.0, uptime - ticks / os.sysconf("SC_CLK_TCK"))
    except (OSError, ValueError, IndexError):
        return 0.0


def cpu_count() -> int:
    """CPUs this process may use: its affinity, lowered by a cgroup CPU quota (v2 or v1)."""
    count = len(os.sched_getaffinity(0))
    quota = _cgroup_cpu_quota()
    return max(1, min(count, quota) if quota else count)


def _cgroup_cpu_quota() -> int | None:
    for quota_file, period_file in (
        ("/sys/fs/cgroup/cpu.max", None),
        ("/sys/fs/cgroup/cpu/cpu.cfs_quota_us", "/sys/fs/cgroup/cpu/cpu.cfs_period_us"),
    ):
        try:
            values = open(quota_file).read().split()
            quota, period = (values[0], values[1]) if period_file is None else (values[0], open(period_file).read().strip())
            if quota not in ("max", "-1"):
                return max(1, int(int(quota) / int(period)))
        except (OSError, ValueError, IndexError):
            continue
    return None


def memory_limits() -> dict[str, int]:
    """Every memory limit this process is under, by source: ``RLIMIT_DATA`` and ``RLIMIT_AS``
    (Grand-Challenge: the instance's memory less 1 GiB), the cgroup (docker/podman
    ``--memory``), and physical memory."""
    limits = {"ram": os.sysconf("SC_PHYS_PAGES") * os.sysconf("SC_PAGE_SIZE")}
    for name, which in (("rlimit_data", resource.RLIMIT_DATA), ("rlimit_as", resource.RLIMIT_AS)):
        soft, _ = resource.getrlimit(which)
        if soft != resource.RLIM_INFINITY:
            limits[name] = soft
    for path in ("/sys/fs/cgroup/memory.max", "/sys/fs/cgroup/memory/memory.limit_in_bytes"):
        try:
            value = open(path).read().strip()
        except OSError:
            continue
        if value.isdigit() and int(value) < limits["ram"]:
            limits["cgroup"] = int(value)
        break
    return limits


def peak_rss_mb() -> int:
    """This process's peak resident memory in MB (``VmHWM``). A forked worker starts from its
    parent's high-water mark, which is small here (the parent only plans and summarises);
    ``ru_maxrss`` is not used because Linux also carries it across exec."""
    return _status_kb("VmHWM") // 1024


def limit_memory(budget_bytes: int) -> None:
    """Let this process add at most ``budget_bytes`` to the data segment it has now (what a
    forked worker inherits is counted by ``RLIMIT_DATA`` too): lowers the soft limit, never
    raises it."""
    soft, hard = resource.getrlimit(resource.RLIMIT_DATA)
    cap = _status_kb("VmData") * 1024 + budget_bytes
    cap = min(cap, hard) if hard != resource.RLIM_INFINITY else cap
    if soft == resource.RLIM_INFINITY or cap < soft:
        resource.setrlimit(resource.RLIMIT_DATA, (cap, hard))


def _status_kb(field: str) -> int:
    with open("/proc/self/status") as status:
        for line in status:
            if line.startswith(field + ":"):
                return int(line.split()[1])
    return 0
