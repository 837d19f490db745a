"""Chunk decoding on a few threads: one process-wide pool, made anew after a fork."""

import os
import threading
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor

from evaluation.readers.zarr_store.base import THREADS


def _pool_executor() -> ThreadPoolExecutor:
    """A process-wide thread pool for chunk decoding, made anew after a fork."""
    global _POOL, _POOL_PID
    with _POOL_LOCK:
        if _POOL is None or os.getpid() != _POOL_PID:
            _POOL, _POOL_PID = ThreadPoolExecutor(max_workers=THREADS, thread_name_prefix="zarr-decode"), os.getpid()
        return _POOL


_POOL: ThreadPoolExecutor | None = None
_POOL_PID: int | None = None
_POOL_LOCK = threading.Lock()


def run_tasks(tasks: list[Callable[[], None]], workers: int) -> None:
    """Run the callables ``tasks`` on up to ``workers`` threads (the caller's included); once
    every started task has finished, the exception of the first failing task *in the list's
    order* is raised, as a serial run would raise it (tasks are started in order, so every
    task before a failing one has run): the message names the same chunk on every run."""
    if workers <= 1 or len(tasks) <= 1:
        for task in tasks:
            task()
        return
    pending, lock = iter(enumerate(tasks)), threading.Lock()
    failures: list[tuple[int, BaseException]] = []

    def drain() -> None:
        while not failures:
            with lock:
                item = next(pending, None)
            if item is None:
                return
            try:
                item[1]()
            except BaseException as exc:  # re-raised by the caller
                failures.append((item[0], exc))

    futures = [_pool_executor().submit(drain) for _ in range(min(workers, len(tasks)) - 1)]
    drain()
    for future in futures:
        if not future.cancel():
            future.result()
    if failures:
        raise min(failures, key=lambda failure: failure[0])[1]
