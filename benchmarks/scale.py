"""The scale runs: ``python -m benchmarks scale``.

For each size (``--papers N`` papers citing ``--citations K`` earlier ones on average): the
generator writes the graph as a folder of Parquet files, flushed to disk before the build
(as a user's edge files would be); the build reads the folder itself
(as ``python -m grail_duckdb build folder/`` does: its ``read`` phase decodes the row groups
and uploads them), builds the index phase by phase and saves it beside the data as it goes
(``build_index(..., save_to=...)``: the children during the labels, the rest after them, the
save's steps timed apart), answers ``--pairs`` uniform random pairs in calls of ``--batch``, loads
the index back (read on every core straight into the device's arrays) and answers them again;
with ``--gpus`` the same pairs are answered by replicas on 1..G GPUs. A small run of the same
paths first takes the first-use compiles (Numba, CUDA) out of the timed figures
(``--no-warm-up`` keeps them in). ``--io-repeats N`` times N - 1 whole saves of the built
index (``idx.save``: nothing overlapped) and N - 1 more loads after the queries; the first
save and load are the figures.
Each phase reports its seconds, the peak host RSS and (on a GPU) the peak bytes in use in
CuPy's pool and reserved by it, sampled every 2 ms, also per edge and per vertex. The answers
are checked where the truth is known without a search: every edge is reachable, no reversed
edge is (the citation graph is a DAG), and every key reaches itself.

Writes ``scale.json`` (``"kind": "scale"``: the command, the machine and every figure of each
size under ``runs``) and ``scale.md`` (the tables) into ``--out`` after every step, so a run
cut short keeps what it measured; :func:`render` makes its section of docs/benchmarks.md.
"""
from __future__ import annotations

import argparse
import gc
import json
import os
import shutil
import sys
import threading
import time
from pathlib import Path

import numpy as np
import pyarrow.parquet as pq

from grail_duckdb.engine.build import build_index
from grail_duckdb.engine.index import load_index
from grail_duckdb.kernels import resolve
from grail_duckdb.tools.generators import write_citation_parquet

from .bench import machine_info
from .memory import rss_bytes as _rss_bytes

GB = 1e9


class PhaseMemory:
    """Peak host RSS and CuPy pool bytes (in use, reserved) per phase, sampled by a thread;
    :meth:`mark` closes the current phase."""

    def __init__(self, gpu: bool, interval: float = 0.002):
        self.pool = None
        if gpu:
            import cupy

            self.pool = cupy.get_default_memory_pool()
        self.interval = interval
        self.phases: dict[str, dict] = {}
        self._lock = threading.Lock()
        self._reset()
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._loop, daemon=True)
        self._thread.start()

    def _now(self) -> tuple[int, int, int]:
        if self.pool is None:
            return _rss_bytes(), 0, 0
        return _rss_bytes(), int(self.pool.used_bytes()), int(self.pool.total_bytes())

    def _reset(self) -> None:
        self.peak = list(self._now())

    def _loop(self) -> None:
        while not self._stop.wait(self.interval):
            now = self._now()
            with self._lock:
                self.peak = [max(a, b) for a, b in zip(self.peak, now)]

    def mark(self, phase: str, seconds: float | None = None) -> dict:
        now = self._now()
        with self._lock:
            peak = [max(a, b) for a, b in zip(self.peak, now)]
            self.peak = list(now)
        row = {"rss_peak": peak[0], "device_used_peak": peak[1], "device_reserved_peak": peak[2]}
        if seconds is not None:
            row["seconds"] = seconds
        self.phases[phase] = row
        return row

    def close(self) -> None:
        self._stop.set()
        self._thread.join()


def _say(*a) -> None:
    print(*a, file=sys.stderr, flush=True)


def _random_pairs(n: int, count: int, seed: int) -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(seed)
    dtype = np.int32 if n < 2**31 else np.int64
    return rng.integers(0, n, count, dtype=dtype), rng.integers(0, n, count, dtype=dtype)


def _answer(index_or_replicas, qs, qt, batch: int, budget: float) -> dict:
    """Answers of the pairs in calls of ``batch``, within ``budget`` seconds (the rest is
    extrapolated, marked ``extrapolated``)."""
    t0 = time.perf_counter()
    done = reachable = 0
    for lo in range(0, qs.shape[0], batch):
        ans = index_or_replicas.reaches(qs[lo:lo + batch], qt[lo:lo + batch])
        reachable += ans.true_count
        done += len(ans)
        if time.perf_counter() - t0 > budget and done < qs.shape[0]:
            break
    seconds = time.perf_counter() - t0
    return {"pairs": int(qs.shape[0]), "answered": done, "reachable": int(reachable),
            "seconds": seconds if done == qs.shape[0] else seconds * qs.shape[0] / done,
            "extrapolated": done < qs.shape[0], "pairs_per_s": done / seconds}


def _check(index, folder: Path, seed: int) -> dict:
    """Edges reachable, reversed edges not (a DAG), keys reach themselves: 100K of each,
    the edges drawn from the first Parquet file."""
    table = pq.read_table(sorted(folder.glob("*.parquet"))[0])
    rng = np.random.default_rng(seed)
    rows = rng.integers(0, table.num_rows, 100_000)
    s = table.column(0).take(rows).to_numpy()
    d = table.column(1).take(rows).to_numpy()
    ok = {"edges": index.reaches(s, d).true_count == len(rows),
          "reversed": index.reaches(d, s).true_count == 0,
          "self": index.reaches(s, s).true_count == len(rows)}
    return {k: bool(v) for k, v in ok.items()}


def warm_up(backend: str, workdir: Path, papers: int = 200_000,
            labels: int | None = None) -> float:
    """One small run of every path the timed run takes (generate, build from Parquet, save,
    load), so that first-use compiles (Numba's, CUDA's) are not timed; its seconds."""
    t0 = time.perf_counter()
    folder = workdir / "warm-up"
    if folder.exists():
        shutil.rmtree(folder)
    write_citation_parquet(folder / "edges", papers, mean_citations=10, seed=1)
    idx = build_index(folder / "edges", labels=labels, backend=backend)
    some = np.arange(min(papers, 100_000))
    idx.reaches(some, some[::-1].copy())
    load_index(idx.save(folder / "edges.grail.parquet"), backend=backend)
    shutil.rmtree(folder, ignore_errors=True)
    return time.perf_counter() - t0


def run_size(papers: int, citations: float, args, say=_say, partial=lambda res: None) -> dict:
    """One size: generate -> build from the Parquet files, the index written as it goes (the
    ETL path: ``build_index(..., save_to=...)``) -> queries -> load -> queries; ``partial``
    receives the results so far after each step (a run cut short keeps them)."""
    backend = resolve(args.backend)
    gpu = backend == "gpu"
    work = Path(args.workdir) / f"citation-{papers}-{citations:g}"
    res: dict = {"papers": papers, "citations": citations, "backend": backend}
    if work.exists():
        shutil.rmtree(work)
    gen = write_citation_parquet(work / "edges", papers, mean_citations=citations, seed=args.seed)
    gen["flush_seconds"] = _flush_to_disk()
    res["generate"] = {**gen, "GB_per_s": gen["bytes"] / GB / gen["seconds"]}
    say(f"[{papers:,}] generated {gen['edges']:,} edges, {gen['files']} files, "
        f"{gen['bytes'] / GB:.2f} GB in {gen['seconds']:.1f} s (then flushed to disk in "
        f"{gen['flush_seconds']:.1f} s)")
    mem = PhaseMemory(gpu)
    try:
        if gpu:
            import cupy

            cupy.get_default_memory_pool().free_all_blocks()
        mem.mark("before build")
        path = work / "edges.grail.parquet"
        t_build = time.perf_counter()
        # the ETL path: the index written as the build goes (its children during the labels)
        idx = build_index(work / "edges", labels=args.labels, backend=backend, save_to=path,
                          progress=lambda phase, s: mem.mark(f"build: {phase}", s))
        total = time.perf_counter() - t_build
        res["phases"] = dict(idx.build_seconds)
        st = res["phases"].pop("save")
        res["build_seconds"] = total - st
        n, m = idx.n_vertices, idx.edge_rows
        res.update(vertices=n, edges=m, components=idx.n_components, dag_edges=idx.dag.m)
        say(f"[{papers:,}] built in {res['build_seconds']:.1f} s: "
            + ", ".join(f"{k} {v:.2f}" for k, v in res["phases"].items()))
        res["memory"] = mem.phases
        size = path.stat().st_size
        res["save"] = {"seconds": st, "bytes": size, "GB_per_s": size / GB / st,
                       "steps": dict(idx.save_seconds)}
        say(f"[{papers:,}] saved {size / GB:.2f} GB, the last {st:.2f} s after the labels "
            "(the children written during them)")
        partial(res)
        res["check"] = _check(idx, work / "edges", args.seed)
        res["save"]["again"] = [_timed(lambda: idx.save(path)) for _ in range(args.io_repeats - 1)]
        partial(res)
        qs, qt = _random_pairs(n, args.pairs, args.seed + 1)
        res["queries_built"] = _answer(idx, qs, qt, args.batch, args.query_budget)
        mem.mark("queries (built index)", res["queries_built"]["seconds"])
        del idx
        if gpu:
            cupy.get_default_memory_pool().free_all_blocks()
        mem.mark("free")
        back, res["load"] = _load(path, backend, gpu)
        mem.mark("load", res["load"]["seconds"])
        res["load"]["GB_per_s"] = size / GB / res["load"]["seconds"]
        say(f"[{papers:,}] loaded in {res['load']['seconds']:.2f} s "
            f"({res['load']['GB_per_s']:.2f} GB/s)")
        res["queries"] = _answer(back, qs, qt, args.batch, args.query_budget)
        mem.mark("queries (loaded index)", res["queries"]["seconds"])
        partial(res)
        say(f"[{papers:,}] {args.pairs:,} pairs in {res['queries']['seconds']:.1f} s"
            f"{' (extrapolated)' if res['queries']['extrapolated'] else ''}")
        if args.dask:
            res["dask"] = _dask(path, qs[:args.dask], qt[:args.dask], back, gpu, args)
            partial(res)
        del back
        res["load"]["again"] = _reloads(path, backend, gpu, args.io_repeats - 1)
        partial(res)
        if gpu and args.gpus > 1:
            res["gpus"] = _multi_gpu(path, qs, qt, args)
    finally:
        mem.close()
        res["memory"] = mem.phases
    if not args.keep:
        shutil.rmtree(work, ignore_errors=True)
    return res


def _flush_to_disk() -> float:
    """Write the generated edges back to disk before the build (seconds): a user's edge files
    were on disk long before, and their pages left to the kernel's write-back would be written
    during the save (2.5B edges, H200 host: 5.2 s of the generator's 9 GB still unwritten
    after it returned)."""
    t0 = time.perf_counter()
    if hasattr(os, "sync"):
        os.sync()
    return time.perf_counter() - t0


def _timed(fn) -> float:
    """Seconds of ``fn()``."""
    t0 = time.perf_counter()
    fn()
    return time.perf_counter() - t0


def _reloads(path: Path, backend: str, gpu: bool, count: int) -> list[float]:
    """Seconds of ``count`` more loads, each index dropped (its device memory back in the
    pool, kept there as a process that loads again would) before the next."""
    out = []
    for _ in range(count):
        index, timing = _load(path, backend, gpu)
        del index
        gc.collect()
        out.append(timing["seconds"])
    return out


def _load(path: Path, backend: str, gpu: bool):
    """Load the index onto the backend (read on every core straight into its arrays)."""
    t0 = time.perf_counter()
    index = load_index(path, backend=backend)
    if gpu:
        import cupy

        cupy.cuda.Device().synchronize()
    return index, {"seconds": time.perf_counter() - t0}


def _multi_gpu(path, qs, qt, args) -> dict:
    """The same pairs on replicas of 1..G GPUs (each loaded from the file)."""
    from grail_duckdb.engine.replicas import Replicas

    out = {}
    for g in sorted({1, args.gpus}):
        reps = Replicas.load(path, devices=list(range(g)))
        reps.reaches(qs[:100_000], qt[:100_000])  # warm-up: modules, tables
        out[g] = _answer(reps, qs, qt, args.batch * g, args.query_budget)
        _say(f"  {g} GPU(s): {out[g]['seconds']:.2f} s for {out[g]['pairs']:,} pairs")
        del reps
    if len(out) > 1:
        out["speedup"] = out[1]["seconds"] / out[args.gpus]["seconds"]
    return out


def _dask(path, qs, qt, index, gpu: bool, args) -> dict:
    """The pairs as a Dask DataFrame answered on a local cluster (one worker per GPU with
    dask-cuda's LocalCUDACluster where there is a GPU), checked against ``index``."""
    import dask.dataframe as dd
    import pandas as pd
    from dask.distributed import Client, LocalCluster

    from grail_duckdb import dask as gdd

    if gpu:
        from dask_cuda import LocalCUDACluster

        cluster = LocalCUDACluster(n_workers=args.gpus, dashboard_address=None)
    else:
        cluster = LocalCluster(n_workers=2, threads_per_worker=1, dashboard_address=None)
    client = Client(cluster)
    try:
        frame = dd.from_pandas(pd.DataFrame({"src": qs, "dst": qt}),
                               npartitions=max(2, qs.shape[0] // 5_000_000))
        t = time.perf_counter()
        got = gdd.reaches(frame, path).compute()
        seconds = time.perf_counter() - t
        t = time.perf_counter()
        again = gdd.reaches(frame, path).compute()
        warm = time.perf_counter() - t
        want = index.reaches(qs, qt).to_numpy(zero_copy_only=False)
        same = bool((got["reaches"].to_numpy(bool) == want).all()
                    and again["reaches"].equals(got["reaches"]))
        loads = client.run(gdd.loaded_indices)
    finally:
        client.close()
        cluster.close()
    _say(f"  dask: {qs.shape[0]:,} pairs, first {seconds:.1f} s (loads included), then "
         f"{warm:.1f} s; same answers: {same}")
    return {"pairs": int(qs.shape[0]), "workers": len(loads), "first_seconds": seconds,
            "warm_seconds": warm, "same_answers": same,
            "loads_per_worker": [len(v) for v in loads.values()]}


def render(kept: dict) -> str:
    """A ``scale.json`` as a section of docs/benchmarks.md: the command and the machine, then
    the tables of :func:`report`."""
    m = kept["machine"]
    where = f"{m.get('cpu', '?')}, {m.get('cores', '?')} cores" + (
        f"; GPU: {m['gpu']}" if m.get("gpu") else "")
    return (f"Command: `{kept['command']}`\n\nDate: {m.get('date', '?')}. Machine: {where}.\n\n"
            + report(kept["runs"]))


def report(results: list[dict]) -> str:
    """The markdown tables of the runs."""
    lines = ["| figure | " + " | ".join(f"{r['papers']:,} x {r['citations']:g}" for r in results) + " |",
             "|---|" + "---:|" * len(results)]

    def row(name, fn):
        cells = []
        for r in results:
            try:
                cells.append(fn(r))
            except (KeyError, TypeError, ValueError, ZeroDivisionError):
                cells.append("-")
        lines.append(f"| {name} | " + " | ".join(cells) + " |")

    row("vertices / edges", lambda r: f"{r['vertices']:,} / {r['edges']:,}")
    row("generate (s, GB)", lambda r: f"{r['generate']['seconds']:.1f} s, {r['generate']['bytes'] / GB:.2f} GB")
    row("  then flushed to disk (s)", lambda r: f"{r['generate'].get('flush_seconds', 0.0):.1f}")
    row("**build (s)**", lambda r: f"**{r['build_seconds']:.2f}**")
    phases = [p for p in results[0].get("phases", {})]
    for p in phases:
        row(f"  {p} (s)", lambda r, p=p: f"{r['phases'][p]:.2f}")
    row("read share of build", lambda r: f"{100 * r['phases']['read'] / r['build_seconds']:.0f}%")
    row("ids share of build", lambda r: f"{100 * r['phases']['ids'] / r['build_seconds']:.1f}%")
    row("peak device in use, build (GB)", lambda r: f"{_build_peak(r, 'device_used_peak') / GB:.1f}")
    row("  per edge + per vertex budget (40 B + 40 B)",
        lambda r: f"{_build_peak(r, 'device_used_peak') / (40 * r['edges'] + 40 * r['vertices']):.2f} of budget")
    row("  bytes per edge", lambda r: f"{_build_peak(r, 'device_used_peak') / r['edges']:.1f}")
    row("peak device reserved, build (GB)", lambda r: f"{_build_peak(r, 'device_reserved_peak') / GB:.1f}")
    row("peak host RSS, build (GB)", lambda r: f"{_build_peak(r, 'rss_peak') / GB:.1f}")
    row("save, after the labels (s; the children written during them)",
        lambda r: f"{r['save']['seconds']:.2f}")
    row("  " + " / ".join(results[0].get("save", {}).get("steps", {})) + " (s)",
        lambda r: " / ".join(f"{v:.2f}" for v in r["save"]["steps"].values()))
    row("  save / build", lambda r: f"{r['save']['seconds'] / r['build_seconds']:.2f}")
    row("  later whole saves of the built index (s)", lambda r: _seconds(r["save"]["again"]))
    row("index file (GB)", lambda r: f"{r['save']['bytes'] / GB:.2f}")
    row("load (s, GB/s)", lambda r: f"{r['load']['seconds']:.2f} s, {r['load']['GB_per_s']:.2f}")
    row("  load / build", lambda r: f"{r['load']['seconds'] / r['build_seconds']:.2f}")
    row("  later loads, after the queries (s)", lambda r: _seconds(r["load"]["again"]))
    row("random pairs (s)", lambda r: f"{'~' if r['queries']['extrapolated'] else ''}{r['queries']['seconds']:.1f} s for {r['queries']['pairs']:,}")
    row("checks (edges, reversed, self)", lambda r: ", ".join(k for k, v in r["check"].items() if v) or "FAILED")
    row("2 GPUs / 1 GPU", lambda r: f"{r['gpus']['speedup']:.2f}x")
    row("Dask (pairs, warm s, same answers)", lambda r: f"{r['dask']['pairs']:,}, "
        f"{r['dask']['warm_seconds']:.1f} s, {r['dask']['same_answers']}")
    mem_lines = ["", "| phase | " + " | ".join(f"{r['papers']:,}" for r in results) + " |",
                 "|---|" + "---:|" * len(results)]
    names = list(dict.fromkeys(p for r in results for p in r.get("memory", {})))
    for p in names:
        cells = []
        for r in results:
            ph = r.get("memory", {}).get(p)
            cells.append("-" if ph is None else f"{ph['device_used_peak'] / GB:.1f} / "
                         f"{ph['device_reserved_peak'] / GB:.1f} / {ph['rss_peak'] / GB:.1f}")
        mem_lines.append(f"| {p} | " + " | ".join(cells) + " |")
    return ("\n".join(lines) + "\n\nPeak memory per phase, GB: device in use / device reserved "
            "(CuPy pool) / host RSS" + "\n".join(mem_lines) + "\n")


def _seconds(values: list[float]) -> str:
    """A row's cell of repeated timings ('-' when there are none)."""
    return " / ".join(f"{v:.2f}" for v in values) or "-"


def _build_peak(r: dict, key: str) -> int:
    """The peak of ``key`` over the build's phases (the save after the labels apart)."""
    return max(v[key] for k, v in r["memory"].items()
               if k.startswith("build: ") and k != "build: save")


def add_arguments(p: argparse.ArgumentParser) -> argparse.ArgumentParser:
    p.add_argument("--papers", type=int, nargs="+", default=[1_000_000],
                   help="graph sizes: papers (vertices) per run (default 1,000,000)")
    p.add_argument("--citations", type=float, default=10.0, help="mean citations per paper")
    p.add_argument("--pairs", type=int, default=1_000_000, help="random pairs to answer")
    p.add_argument("--batch", type=int, default=1_000_000, help="pairs per call")
    p.add_argument("--query-budget", type=float, default=60.0,
                   help="seconds of queries per measurement; the rest is extrapolated")
    p.add_argument("--gpus", type=int, default=1, help="also answer on replicas of 1..G GPUs")
    p.add_argument("--dask", type=int, default=0, metavar="PAIRS",
                   help="also answer this many of the pairs on a local Dask cluster")
    p.add_argument("--labels", type=int, default=None,
                   help="GRAIL label pairs d (default: the backend's, as a build's)")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--backend", choices=["auto", "cpu", "gpu"], default=None)
    p.add_argument("--workdir", default="scale-work", help="where the Parquet files go")
    p.add_argument("--keep", action="store_true", help="keep the generated files")
    p.add_argument("--io-repeats", type=int, default=1, metavar="N",
                   help="time N - 1 whole saves of the built index after the build's own "
                        "and N - 1 more loads (the first save and load are the figures)")
    p.add_argument("--no-warm-up", action="store_true",
                   help="time the first run with its first-use compiles")
    p.add_argument("--out", default="scale-out", help="folder for scale.json and scale.md")
    return p


def _command(args) -> str:
    """The command line that repeats a run of these arguments."""
    words = ["python -m benchmarks scale"]
    for key, value in sorted(vars(args).items()):
        if key in ("func", "command") or value is None or value is False:
            continue
        flag = "--" + key.replace("_", "-")
        words += [flag] if value is True else [flag, *map(str, value if isinstance(value, list)
                                                            else [value])]
    return " ".join(words)


def run(args) -> int:
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    results: list[dict] = []

    command, machine = _command(args), machine_info()

    def write(current=None):
        done = results + ([current] if current is not None else [])
        kept = {"kind": "scale", "command": command, "machine": machine, "runs": done}
        (out / "scale.json").write_text(json.dumps(kept, indent=1, default=str))
        (out / "scale.md").write_text(report(done))

    if not args.no_warm_up:
        seconds = warm_up(resolve(args.backend), Path(args.workdir), min(200_000, *args.papers),
                            args.labels)
        _say(f"warm-up (first-use compiles, not timed below): {seconds:.1f} s")
    for papers in args.papers:
        results.append(run_size(papers, args.citations, args, partial=write))
        write()
    print(report(results))
    return 0
