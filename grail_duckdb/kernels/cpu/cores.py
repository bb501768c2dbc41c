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

import numba

from ...jit import njit

__all__ = ["on_cores", "on_threads", "cores", "item_rows", "task_range"]


def cores() -> int:
    """Threads a kernel spreads over: ``NUMBA_NUM_THREADS`` (default: every core)."""
    return max(1, int(numba.config.NUMBA_NUM_THREADS))


class _Pool:
    """Threads that each wait on an event of their own for the next piece of work: one
    ``set`` wakes a worker (a shared queue and a future per task cost twice as long)."""

    def __init__(self, workers: int):
        self.go = [threading.Event() for _ in range(workers)]
        self.busy = threading.Lock()        # one piece of work at a time
        self.left_lock = threading.Lock()
        self.done = threading.Event()
        self.job = None
        self.left = 0
        for w in range(workers):
            threading.Thread(target=self._work, args=(w,), daemon=True,
                             name=f"grail-core-{w + 1}").start()

    def _work(self, w: int) -> None:
        go = self.go[w]
        while True:
            go.wait()
            go.clear()
            kernel, tasks, args, out = self.job
            try:
                out[w + 1] = kernel(w + 1, tasks, *args)
            except BaseException as exc:    # raised in the calling thread
                out[w + 1] = _Failed(exc)
            with self.left_lock:
                self.left -= 1
                if self.left == 0:
                    self.done.set()

    def run(self, kernel, tasks: int, args) -> list:
        out = [None] * tasks
        self.job, self.left = (kernel, tasks, args, out), tasks - 1
        self.done.clear()
        for w in range(tasks - 1):
            self.go[w].set()
        try:
            out[0] = kernel(0, tasks, *args)
        finally:
            self.done.wait()
        for r in out:
            if isinstance(r, _Failed):
                raise r.exc
        return out


class _Failed:
    def __init__(self, exc):
        self.exc = exc


_pool: _Pool | None = None
_pool_lock = threading.Lock()


def _the_pool() -> _Pool:
    global _pool
    with _pool_lock:
        if _pool is None:
            _pool = _Pool(max(1, cores() - 1))
        return _pool


def on_cores(kernel, tasks: int, *args) -> list:
    """``kernel(task, tasks, *args)`` for every task in ``range(tasks)``, side by side;
    returns their results in task order. An exception of any task is raised once every task
    has ended (none is left writing into the arrays). While another thread's work holds the
    threads, or with more tasks than threads, the tasks run one after the other here."""
    tasks = int(tasks)
    if tasks > 1 and not kernel.runs_compiled(args):
        return [kernel(task, tasks, *args) for task in range(tasks)]
    return _side_by_side(kernel, tasks, args)


def on_threads(fn, tasks: int, *args) -> list:
    """:func:`on_cores` for a Python function ``fn(task, tasks, *args)`` whose work is calls of
    compiled kernels that release the GIL: its tasks share the same threads. The caller asks
    for one task where those kernels run their Python source (:mod:`grail_duckdb.jit`: an
    interpreted call that fails is undone by restoring its whole arrays, other tasks' rows
    too), as :func:`on_cores` does for its kernel."""
    return _side_by_side(fn, int(tasks), args)


def _side_by_side(fn, tasks: int, args) -> list:
    """The tasks of ``fn`` on the pool's threads and this one, or one after the other here
    (one task, more tasks than threads, or the threads busy with other work)."""
    if tasks > 1:
        pool = _the_pool()
        if tasks - 1 <= len(pool.go) and pool.busy.acquire(blocking=False):
            try:
                return pool.run(fn, tasks, args)
            finally:
                pool.busy.release()
    return [fn(task, tasks, *args) for task in range(tasks)]


def item_rows(total: int, tasks: int, least: int = 8, per_task: int = 8) -> int:
    """Rows per item of ``total`` rows that ``tasks`` threads take in turn: ``per_task`` items
    a thread (items of unequal cost, such as the chunks of one column, then balance out), at
    least ``least`` (each item costs a call), a multiple of 8 (an item's answer bits start on
    a byte); every row at once for one task.

    >>> item_rows(1_000_000, 2), item_rows(100_000, 2, 16_384), item_rows(1_000, 1)
    (62504, 16384, 1000)
    """
    if tasks <= 1:
        return max(total, 1)
    return max(least, (-(-total // (per_task * tasks)) + 7) & ~7)


@njit(inline="always", cache=True, nogil=True, boundscheck=False)
def task_range(total, task, tasks):
    """``[lo, hi)``: task ``task``'s share of ``total`` items (near-equal, in order)."""
    return total * task // tasks, total * (task + 1) // tasks
