"""Chunk decoding on a few threads: one process-wide pool, made anew after a fork."""

import os
import threading
from concurrent.futures import ThreadPoolExecutor

from evaluation.readers.zarr_store.base import THREADS


def _pool_executor():
    """A process-wide thread pool for chunk decoding, made anew after a fork."""
    global _POOL, _POOL_PID
    with _POOL_LOCK:
        if _POOL is None or os.getpid() != _POOL_PID:
            _POOL, _POOL_PID = ThreadPoolExecutor(max_workers=THREADS, thread_name_prefix="zarr-decode"), os.getpid()
        return _POOL


_POOL, _POOL_PID, _POOL_LOCK = None, None, threading.Lock()


def run_tasks(tasks: list, workers: int) -> None:
    """Run the callables ``tasks`` on up to ``workers`` threads (the caller's included); the
    first exception is raised once every started task has finished."""
    if workers <= 1 or len(tasks) <= 1:
        for task in tasks:
            task()
        return
    pending, lock, failures = iter(tasks), threading.Lock(), []

    def drain():
        while not failures:
            with lock:
                task = next(pending, None)
            if task is None:
                return
            try:
                task()
            except BaseException as exc:  # re-raised by the caller
                failures.append(exc)

    futures = [_pool_executor().submit(drain) for _ in range(min(workers, len(tasks)) - 1)]
    drain()
    for future in futures:
        if not future.cancel():
            future.result()
    if failures:
        raise failures[0]
