"""Work spread over the cores: a serial kernel run as several tasks on the process's threads.

A kernel that uses every core is a serial ``nogil`` kernel whose first two parameters are
``task`` and ``tasks``; :func:`on_cores` runs it ``tasks`` times side by side, the calling
thread taking task 0 and a pool of threads the others, none holding the GIL while the kernel
runs. The tasks share the work out themselves: a range cut by task number
(:func:`task_range`), or pieces of a level claimed from a shared counter (:mod:`.sweeps`).

Numba's own ``parallel=True`` would run such loops too, but it compiles every parallel loop
into a function of its own through passes that cost a kernel one to seven seconds more to
compile than its serial body: most of a fresh machine's first wait. Here each kernel is
compiled once, serially.

While a kernel is not compiled yet and runs its Python source (small work, see
:mod:`grail_duckdb.jit`), its tasks run one after the other on the calling thread: Python
code gains nothing from threads, and every task-sharing scheme of the package gives the same
result when one task finds all the work left to it.
"""
from __future__ import annotations

import threading
from concurrent.futures import ThreadPoolExecutor, wait

import numba

from ...jit import njit

__all__ = ["on_cores", "cores", "task_range"]

_pool: ThreadPoolExecutor | None = None
_pool_lock = threading.Lock()


def cores() -> int:
    """Threads a kernel spreads over: ``NUMBA_NUM_THREADS`` (default: every core)."""
    return max(1, int(numba.config.NUMBA_NUM_THREADS))


def _executor() -> ThreadPoolExecutor:
    global _pool
    with _pool_lock:
        if _pool is None:
            _pool = ThreadPoolExecutor(max(1, cores() - 1), thread_name_prefix="grail-core")
        return _pool


def on_cores(kernel, tasks: int, *args) -> list:
    """``kernel(task, tasks, *args)`` for every task in ``range(tasks)``, side by side;
    returns their results in task order. An exception of any task is raised once every task
    has ended (none is left writing into the arrays)."""
    tasks = int(tasks)
    if tasks <= 1 or not kernel.runs_compiled(args):
        return [kernel(task, tasks, *args) for task in range(tasks)]
    futures = [_executor().submit(kernel, task, tasks, *args) for task in range(1, tasks)]
    try:
        first = kernel(0, tasks, *args)
    finally:
        wait(futures)
    return [first] + [f.result() for f in futures]


@njit(inline="always", cache=True, nogil=True, boundscheck=False)
def task_range(total, task, tasks):
    """``[lo, hi)``: task ``task``'s share of ``total`` items (near-equal, in order)."""
    return total * task // tasks, total * (task + 1) // tasks
