"""Where rescore's units run: a Dask cluster (a new ``LocalCluster`` of single-threaded
worker processes, or any running scheduler), connected on first use, and watched while units
are out, so that a run shows its progress, logs a worker that goes away and gives up (keeping
what is done) when no worker is left, instead of waiting forever."""

import time

from evaluation import log, machine
from evaluation.errors import PhaseError

_log = log.get(__name__)

# Dask's nannies set MALLOC_TRIM_THRESHOLD_=65536 in their workers. Setting it switches off
# glibc's dynamic mmap threshold, so every array above 128 KiB is mapped afresh and faulted in
# page by page: scoring ran 1.7x slower (bench/rescore_scaling.py). None unsets it.
WORKER_CONFIG = {"distributed.nanny.pre-spawn-environ.MALLOC_TRIM_THRESHOLD_": None}


def connect(scheduler: str | None, workers: int | None):
    """A Dask client: to the given scheduler, or to a new LocalCluster of single-threaded
    worker processes. Returns (client, cluster or None)."""
    try:
        import dask
        from dask.distributed import Client, LocalCluster
    except ImportError:
        raise PhaseError("rescore needs Dask distributed: pip install 'evaluation[ops]'") from None
    if scheduler:
        return Client(scheduler), None
    with dask.config.set(WORKER_CONFIG):
        cluster = LocalCluster(
            n_workers=workers or machine.cpu_count(), threads_per_worker=1, processes=True, dashboard_address=None
        )
    return Client(cluster), cluster


# With no Dask worker left for this long, the run gives up (the units done are kept for the next).
WORKER_TIMEOUT_S = 300.0
POLL_S = 5.0


class Watch:
    """The run's view of its cluster while units are out: progress at a terminal (units done,
    time left), a worker that goes away (in the log: on an external cluster it is otherwise
    invisible), and no worker at all for ``timeout`` seconds (the run gives up, keeping what is
    done, instead of waiting forever)."""

    def __init__(self, progress, timeout: float):
        self.progress, self.timeout = progress, timeout
        self.total = self.done = self.lost = 0
        self.workers: set[str] = set()
        self.alone_since: float | None = None
        self.gave_up = False

    def finished(self, dask: "Dask", futures: list) -> list:
        """The futures that finished within the next poll (none when the run gave up)."""
        from dask.distributed import wait

        try:
            done, _ = wait(futures, timeout=POLL_S, return_when="FIRST_COMPLETED")
        except TimeoutError:  # distributed's wait raises when nothing finished in time
            done = set()
        self.done += len(done)
        self.progress.update(self.done, self.total)
        self._look_at(dask)
        return list(done)

    def _look_at(self, dask: "Dask") -> None:
        now = set(dask.client.scheduler_info().get("workers", {}))
        for address in sorted(self.workers - now):
            self.lost += 1
            _log.warning("worker_lost", worker=address, left=len(now))
        self.workers = now
        if now:
            self.alone_since = None
            return
        self.alone_since = self.alone_since or time.monotonic()
        waited = time.monotonic() - self.alone_since
        _log.warning("no_worker", waited_s=round(waited), gives_up_after_s=self.timeout)
        self.gave_up = waited >= self.timeout

    def close(self) -> None:
        self.progress.close()


class Dask:
    """The cluster, connected on first use: a run that finds everything on disk starts none."""

    def __init__(self, scheduler: str | None, workers: int | None):
        self.scheduler, self.workers = scheduler, workers
        self._client = self._cluster = None

    @property
    def client(self):
        if self._client is None:
            self._client, self._cluster = connect(self.scheduler, self.workers)
        return self._client

    def close(self) -> None:
        if self._client is not None:
            self._client.close()
        if self._cluster is not None:
            self._cluster.close()
