"""The bench command: one run that measures the engine beside the alternatives a user has.

``python -m benchmarks run [--datasets ...] [--queries N] [--backend cpu|gpu|all] [--out DIR]``.
For every workload (a dataset by name, an edge file,
or a seeded generator ``gen:citation:N``, ``gen:random:N:DEGREE``, ``gen:rmat:SCALE[:FACTOR]``)
and every backend it measures:

* the index build, phase by phase, the peak host memory of the build (resident set size sampled
  from ``/proc/self/statm`` every 2 ms by a thread, minus the size when the build started) and,
  on a GPU, the high-water mark of CuPy's memory pool; the save and load time and the size of
  the index file;
* the time for two query sets, reported apart: uniform random pairs (almost all unreachable)
  and reachable pairs (random walks), with the statistics of which cut settled each query;
* GTEPS of the traversal primitive: single-source traversals from 64 random roots with the
  kernels' ``reach_within_colour`` (a worklist on the CPU), on the input graph and on the
  condensed DAG that the query search walks;
* the baselines, in the same process: NetworkX ``has_path`` and SciPy BFS per pair and DuckDB's
  recursive CTE with ``USING KEY`` (on a prefix sized to ``--budget`` seconds, scaled up and
  marked as sampled), the engine's own search with every cut off (the plain multi-source
  bitmask BFS), and the SQL paths: the scalar ``reaches``, the whole-column ``reaches_pairs``
  and an identity arrow UDF (DuckDB's floor for any Python UDF).

It writes ``bench.md`` (Markdown tables: absolute times and the ratio to the best baseline, the
machine named), ``bench.json`` (every figure) and ``bench.png`` (throughput per method, log
scale) into ``--out``, and prints progress lines on stderr. ``--quick`` runs small generated
graphs and a few queries (the CI smoke test).

Threads: the build's Numba kernels are serial; a query call of the CPU backend uses every core
(``NUMBA_NUM_THREADS`` for its classification, a thread pool of ``os.cpu_count()`` for its exact
search); DuckDB is set to ``--threads`` (default 1).
Warm-up (Numba loading or compiling, CuPy modules) runs before any timed region; timings under
a second are the best of three runs.
"""
from __future__ import annotations

import argparse
import json
import os
import platform
import shlex
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

import duckdb
import numba
import numpy as np
import pyarrow as pa

from grail_duckdb.indexfile import atomic_write
from grail_duckdb.engine.build import DEFAULT_LABELS, build_index
from grail_duckdb.engine.index import load_index
from grail_duckdb.engine.ingest import as_column
from grail_duckdb.errors import GrailError
from grail_duckdb.kernels import gpu_available, resolve
from grail_duckdb.tools import generators as gen
from grail_duckdb.tools.readers import read_edges

from . import baselines as bl
from . import datasets, workloads
from .bfl import run_bfl
from .calls import SCALE_SIZES, bench_scale
from .memory import PeakMemory, PoolGrowth, max_rss_bytes, query_memory
from .report import plot, to_markdown
from .sql_paths import bench_identity, bench_sql
from .traversal import bench_traversal

DEFAULT_DATASETS = ["citeseer", "uniprot", "cit-HepTh"]
QUICK_DATASETS = ["gen:citation:20000", "gen:random:5000:4", "gen:rmat:12"]
QUICK_QUERIES = 2000
QUICK_BUDGET = 0.3

# ----------------------------------------------------------------------------------------------
# command line
# ----------------------------------------------------------------------------------------------
def add_arguments(parser: argparse.ArgumentParser) -> argparse.ArgumentParser:
    """Register the bench options on ``parser`` (the ``bench`` subcommand of the CLI)."""
    parser.add_argument("--datasets", nargs="+", metavar="WORKLOAD", default=None,
                        help="dataset names (see benchmarks/datasets.py), edge files, or "
                             "gen:citation:N[:MEAN], gen:random:N:DEGREE, "
                             "gen:rmat:SCALE[:FACTOR] "
                             f"(default: {' '.join(DEFAULT_DATASETS)})")
    parser.add_argument("--queries", type=int, default=None,
                        help="pairs per query set (default 100000; --quick: 2000)")
    parser.add_argument("--backend", choices=("cpu", "gpu", "all"), default="all",
                        help="where the index is built and searched; 'all' = every backend "
                             "this machine has (default)")
    parser.add_argument("--out", default="bench-out", help="folder for bench.md, bench.json, "
                        "bench.png (default: bench-out)")
    parser.add_argument("--labels", type=int, default=None,
                        help="GRAIL label pairs d (default: each backend's, "
                             f"{DEFAULT_LABELS['cpu']} on the CPU, {DEFAULT_LABELS['gpu']} on "
                             "a GPU)")
    parser.add_argument("--seed", type=int, default=0, help="seed of generators, queries, "
                        "labels and roots (default 0)")
    parser.add_argument("--budget", type=float, default=None,
                        help="seconds each per-pair baseline may run per query set; it runs on "
                             "as many pairs as fit and is scaled up (default 10; --quick: 0.3)")
    parser.add_argument("--roots", type=int, default=64,
                        help="roots of the single-source traversals for GTEPS (default 64)")
    parser.add_argument("--threads", type=int, default=1,
                        help="DuckDB threads for the SQL paths and the CTE (default 1)")
    parser.add_argument("--scale", type=int, nargs="*", default=None, metavar="PAIRS",
                        help="random pairs per call of the scale figures, besides the fixed "
                             "cost of a call settled by the cuts (default 1000000 10000000; "
                             "--quick: 20000; none: skip them)")
    parser.add_argument("--no-baselines", action="store_true",
                        help="measure the engine only (no NetworkX, SciPy, CTE, SQL rows)")
    parser.add_argument("--bfl", metavar="PATH", default=None,
                        help="BFL's program (built from BoleynSu/bfl): its build and queries "
                             "on the same DAG and pairs, one core")
    parser.add_argument("--quick", action="store_true",
                        help="small generated graphs, few queries: the smoke test (< 1 min)")
    return parser


def settings(args) -> dict:
    """The effective settings of a run (``--quick`` fills in what was not given)."""
    quick = bool(args.quick)
    return {
        "datasets": list(args.datasets or (QUICK_DATASETS if quick else DEFAULT_DATASETS)),
        "queries": int(args.queries or (QUICK_QUERIES if quick else 100_000)),
        "backend": args.backend,
        "out": str(args.out),
        "labels": None if args.labels is None else int(args.labels),
        "seed": int(args.seed),
        "budget": float(args.budget if args.budget is not None
                        else (QUICK_BUDGET if quick else 10.0)),
        "roots": int(args.roots),
        "threads": int(args.threads),
        "baselines": not args.no_baselines,
        "bfl": args.bfl,
        "scale": [int(x) for x in (args.scale if args.scale is not None
                                   else ((20_000,) if quick else SCALE_SIZES))],
        "quick": quick,
        "prog": getattr(args, "bench_prog", "python -m benchmarks run"),
    }


def command_line(s: dict) -> str:
    """The command that reproduces a run with these settings (quoted for a POSIX shell)."""
    prog = s.get("prog", "python -m benchmarks run").split()
    words = [*prog, "--datasets", *s["datasets"],
             "--queries", str(s["queries"]), "--backend", s["backend"],
             *(() if s["labels"] is None else ("--labels", str(s["labels"]))),
             "--seed", str(s["seed"]), "--budget", f"{s['budget']:g}",
             "--roots", str(s["roots"]), "--threads", str(s["threads"]), "--out", s["out"]]
    words += ["--scale", *(str(x) for x in s.get("scale", SCALE_SIZES))]
    if not s["baselines"]:
        words.append("--no-baselines")
    if s.get("bfl"):
        words += ["--bfl", s["bfl"]]
    return shlex.join(words)


def run(args) -> int:
    """Run the bench with parsed ``args``; 0 on success, 2 on a bad workload or backend."""

    s = settings(args)
    say = Progress()
    try:
        backends = resolve_backends(s["backend"])
        report = run_bench(s, backends, say)
    except (GrailError, BenchInputError) as exc:
        print(f"grail_duckdb bench: {exc}", file=sys.stderr)
        return 2
    out = Path(s["out"])
    out.mkdir(parents=True, exist_ok=True)
    (out / "bench.json").write_text(json.dumps(report, indent=2, default=_json_default))
    (out / "bench.md").write_text(to_markdown(report))
    plot(report, out / "bench.png")
    say(f"wrote {out / 'bench.md'}, {out / 'bench.json'}, {out / 'bench.png'}")
    return 0


class BenchInputError(ValueError):
    """A workload spec or option the bench cannot use."""


class Progress:
    """Progress lines on stderr, each stamped with the seconds since the bench started."""

    def __init__(self, stream=None):
        self.t0 = time.perf_counter()
        self.stream = stream or sys.stderr

    def __call__(self, message: str) -> None:
        print(f"[bench {time.perf_counter() - self.t0:7.1f}s] {message}", file=self.stream,
              flush=True)


def resolve_backends(which: str) -> list[str]:
    """'cpu' / 'gpu' / 'all' -> the backends to run ('all': the GPU too when there is one)."""

    if which == "all":
        return ["cpu", "gpu"] if gpu_available() else ["cpu"]
    return [resolve(which)]


# ----------------------------------------------------------------------------------------------
# workloads
# ----------------------------------------------------------------------------------------------
@dataclass
class Workload:
    name: str
    spec: str
    edges: pa.Table  # columns src, dst


def load_workload(spec: str, seed: int = 0) -> Workload:
    """A workload spec -> its edge table: ``gen:...`` generators, an edge file, or a dataset."""
    if spec.startswith("gen:"):
        return Workload(spec[4:], spec, _generated(spec, seed))
    if os.path.exists(spec):

        return Workload(Path(spec).name, spec, _src_dst(read_edges(spec)))

    try:
        table = datasets.load_dataset(spec)
    except (KeyError, FileNotFoundError, LookupError) as exc:
        raise BenchInputError(f"unknown workload {spec!r}: not a file, not gen:..., and not a "
                              f"dataset ({exc})") from exc
    return Workload(spec, spec, _src_dst(table))


def check_workload(spec: str) -> None:
    """Refuse a spec that cannot load before any work starts (a typo must not cost a run)."""
    if spec.startswith("gen:"):
        kind, *nums = spec.split(":")[1:]
        arity = {"citation": (1, 2), "random": (2,), "rmat": (1, 2)}.get(kind, ())
        try:
            ok = len(nums) in arity and all(float(x) > 0 for x in nums)
        except ValueError:
            ok = False
        if not ok:
            raise BenchInputError(f"bad generator spec {spec!r}; use gen:citation:N[:MEAN], "
                                  "gen:random:N:DEGREE or gen:rmat:SCALE[:EDGE_FACTOR]")
    elif not os.path.exists(spec):

        try:
            datasets.lookup(spec)
        except LookupError as exc:
            raise BenchInputError(f"unknown workload {spec!r}: not a file, not gen:..., and "
                                  f"not a dataset ({exc})") from exc


def _generated(spec: str, seed: int) -> pa.Table:
    """Edges of ``gen:citation:N[:MEAN]``, ``gen:random:N:DEGREE`` or
    ``gen:rmat:SCALE[:FACTOR]`` (MEAN: mean citations per paper, default 4.38)."""

    parts = spec.split(":")
    try:
        kind, nums = parts[1], [float(p) for p in parts[2:]]
        if kind == "citation" and len(nums) in (1, 2):
            mean = {"mean_citations": nums[1]} if len(nums) == 2 else {}
            return _src_dst(gen.citation_dag(int(nums[0]), seed=seed, **mean))
        if kind == "random" and len(nums) == 2:
            return _src_dst(gen.random_dag(int(nums[0]), nums[1], seed=seed))
        if kind == "rmat" and len(nums) in (1, 2):
            factor = int(nums[1]) if len(nums) == 2 else 16
            return _src_dst(gen.rmat(int(nums[0]), factor, seed=seed))
    except (IndexError, ValueError):
        pass
    raise BenchInputError(f"bad generator spec {spec!r}; use gen:citation:N[:MEAN], "
                          "gen:random:N:DEGREE or gen:rmat:SCALE[:EDGE_FACTOR]")


def _src_dst(table: pa.Table) -> pa.Table:
    """The first two columns named src and dst (schema metadata, e.g. a vertex count, kept)."""
    if table.column_names[:2] != ["src", "dst"]:
        table = table.select([0, 1]).rename_columns(["src", "dst"])
    return table


def query_sets(edges: pa.Table, keys: pa.Array, count: int, seed: int) -> dict[str, pa.Table]:
    """The two query sets: uniform random pairs of vertices, and reachable pairs."""

    return {"random": workloads.random_pairs(keys, count, seed=seed),
            "reachable": workloads.reachable_pairs(edges, count, seed=seed)}


# ----------------------------------------------------------------------------------------------
# measuring
# ----------------------------------------------------------------------------------------------
#: edges of the workload prefix that each warm-up builds on
WARM_UP_EDGES = 50_000
#: pairs of the warm-up's large call (at least a timed call's: 100K)
WARM_UP_PAIRS = 131_072


def warm_up(backend: str, edges: pa.Table | None = None, s: dict | None = None) -> None:
    """Load (or compile) every kernel the timed regions use, before any timer starts.

    Without ``edges``: a small graph with cycles, on int and string keys. With them: the same
    steps on a prefix of the workload itself, so that its key type and array types, and code
    paths that only some graphs take (colour propagation, the GPU's larger launches), are
    compiled too; a first run that compiles would otherwise be timed (runs over a second are
    not repeated).
    """

    if edges is None:
        src = [0, 1, 2, 2, 3, 5, 6, 7, 7, 9]
        dst = [1, 2, 0, 3, 4, 6, 7, 5, 8, 8]
        tables = [pa.table({"src": src, "dst": dst}),
                  pa.table({"src": [str(x) for x in src], "dst": [str(x) for x in dst]})]
    else:
        tables = [edges.slice(0, min(edges.num_rows, WARM_UP_EDGES))]
    labels = (s or {}).get("labels", 5)
    for table in tables:
        with tempfile.TemporaryDirectory(prefix="grail-warm-") as tmp:
            idx = build_index(table, labels=labels, backend=backend,
                              save_to=Path(tmp) / "w.grail.parquet")  # the save's gathers too
            load_index(Path(tmp) / "w.grail.parquet", backend=backend)
        src, dst = as_column(table.column("src")), as_column(table.column("dst"))
        idx.reaches_with_stats(src, dst)
        idx.reaches_with_stats(dst, src)
        idx.reaches_with_stats(src[:640], dst[:640], use_cuts=False)
        # a call as large as the timed ones: their code paths (parallel staging and
        # classification, the thread's reusable buffers) are compiled and allocated here
        reps = -(-WARM_UP_PAIRS // max(len(src), 1))
        idx.reaches_with_stats(pa.concat_arrays([src] * reps), pa.concat_arrays([dst] * reps))
        bench_traversal(idx, table, roots=2, seed=0)
        idx.kernels.synchronize()


def bench_build(edges: pa.Table, backend: str, s: dict, say) -> tuple[object, dict]:
    """Build the index (best of three when under a second); phases, memory, save, load."""

    def build(save_to=None):
        return build_index(edges, labels=s["labels"], seed=s["seed"], backend=backend,
                           save_to=save_to)

    with PeakMemory(gpu=backend == "gpu") as mem:
        seconds, idx = bl.best_of(build, repeat=1)
    if seconds < bl.SHORT_SECONDS:
        for _ in range(2):
            again = build()
            if sum(again.build_seconds.values()) < sum(idx.build_seconds.values()):
                idx = again
    phases = dict(idx.build_seconds)
    out = {"summary": idx.summary(), "phases_seconds": phases,
           "total_seconds": sum(phases.values()), "memory": mem.as_dict(),
           "max_rss_bytes_process": max_rss_bytes()}
    say(f"  build {backend}: {out['total_seconds'] * 1e3:.0f} ms "
        f"({', '.join(f'{k} {v * 1e3:.0f}' for k, v in phases.items())}); "
        f"peak RSS +{mem.peak - mem.start >> 20} MiB")
    out["persistence"] = bench_persistence(idx, build)
    if out["persistence"].get("save_seconds") is not None:
        p = out["persistence"]
        say(f"  save {p['save_seconds'] * 1e3:.0f} ms (as the build goes: "
            f"{p['etl_save_seconds'] * 1e3:.0f} ms after a {p['etl_build_seconds'] * 1e3:.0f} "
            f"ms build), load {p['load_seconds'] * 1e3:.0f} ms, "
            f"{p['size_bytes'] / 2**20:.1f} MiB on disk")
    return idx, out


class _FreshPaths:
    """A new file name for every timed save, the file before it removed first, untimed: a
    save over an existing file also frees that file's blocks (on ext4 with ``discard``, about 2 s
    for a 9.5 GB index, in the background), which is the disk's
    work, not the save's; the figures are those of a first build's file."""

    def __init__(self, folder: Path):
        self.folder, self.count, self.last = folder, 0, None

    def next(self) -> Path:
        if self.last is not None:
            self.last.unlink(missing_ok=True)
        atomic_write.wait_for_removals()
        self.count += 1
        self.last = self.folder / f"bench{self.count}.grail.parquet"
        return self.last


def bench_persistence(idx, build) -> dict:
    """Time ``idx.save`` (the whole save of a built index), the ETL path's save
    (``build(save_to=path)``: the children written during the labels, the intervals during
    the hub passes, the save phase the time after them; the build it came with, its save
    excluded, is ``etl_build_seconds``; the best of three when the build is short) and
    ``load_index``; the file's size. Every save writes a new file (:class:`_FreshPaths`)."""

    with tempfile.TemporaryDirectory(prefix="grail-bench-") as tmp:
        paths = _FreshPaths(Path(tmp))
        try:
            save_s, _ = bl.best_of(lambda: idx.save(paths.last), before=paths.next)
        except (ImportError, AttributeError, NotImplementedError) as exc:
            return {"save_seconds": None, "note": f"persistence unavailable: {exc}"}
        path = paths.last
        size = path.stat().st_size
        load_s, _ = bl.best_of(lambda: load_index(path, expect_fingerprint=idx.fingerprint))
        etl = []
        while not etl or (len(etl) < 3 and etl[0][0] + etl[0][1] < bl.SHORT_SECONDS):
            streamed = build(save_to=paths.next())
            phases = dict(streamed.build_seconds)
            etl.append((sum(phases.values()) - phases["save"], phases["save"],
                        dict(streamed.save_seconds)))
            del streamed
        etl_build, etl_save, steps = min(etl, key=lambda e: e[1])
        paths.next()  # the last file removed before the folder goes
    return {"save_seconds": save_s, "load_seconds": load_s, "size_bytes": size,
            "etl_build_seconds": etl_build, "etl_save_seconds": etl_save,
            "etl_save_steps": steps}


def bench_engine(idx, pairs: pa.Table) -> tuple[dict, np.ndarray]:
    """The engine on one query set (one untimed call, then the best of five, or of 25 under
    10 ms): timing, cut statistics, answers."""
    src, dst = pairs.column("src"), pairs.column("dst")

    def once():
        result = idx.reaches_with_stats(src, dst)
        idx.kernels.synchronize()
        return result

    once()  # untimed: the first calls after a build run slower on some hosts (measured: 11 ms
    # instead of 0.3 for 100K pairs on a 16-core host, for three calls and more)
    seconds, (answers, stats) = bl.best_of(once, repeat=5)
    expected = answers.to_numpy(zero_copy_only=False).astype(bool)
    m = bl.Measured(seconds=seconds, total=len(pairs), run_pairs=len(pairs), sampled=False)
    out = m.as_dict()
    out["stats"] = stats.as_dict()
    out["reachable_fraction"] = float(expected.mean()) if len(expected) else 0.0
    return out, expected


def bench_plain_bfs(idx, pairs: pa.Table, expected: np.ndarray, budget: float) -> dict:
    """The engine's search with every cut off (plain multi-source bitmask BFS), sampled."""
    def answer(s, d):
        a, _ = idx.reaches_with_stats(s, d, use_cuts=False)
        idx.kernels.synchronize()
        return a.to_numpy(zero_copy_only=False)

    src, dst = as_column(pairs.column("src")), as_column(pairs.column("dst"))
    return bl.measure(answer, src, dst, expected, budget=budget, probe=640).as_dict()


# ----------------------------------------------------------------------------------------------
# the run
# ----------------------------------------------------------------------------------------------
def run_bench(s: dict, backends: list[str], say) -> dict:
    """Every workload on every backend, with the baselines: the whole report as a dict."""
    for spec in s["datasets"]:
        check_workload(spec)
    say(f"machine: {machine_info()['cpu']}; backends: {', '.join(backends)}")
    for b in backends:
        t0 = time.perf_counter()
        warm_up(b)
        say(f"warm-up {b}: {time.perf_counter() - t0:.1f} s (kernels loaded or compiled)")
    report = {"command": command_line(s), "settings": s, "machine": machine_info(),
              "workloads": []}
    for spec in s["datasets"]:
        report["workloads"].append(bench_workload(spec, backends, s, say))
    return report


def bench_workload(spec: str, backends: list[str], s: dict, say) -> dict:
    """One workload: build and query on each backend, then the baselines on the same pairs."""
    t0 = time.perf_counter()
    w = load_workload(spec, s["seed"])
    say(f"{w.name}: {w.edges.num_rows:,} edges loaded in {time.perf_counter() - t0:.1f} s")
    result: dict = {"name": w.name, "spec": spec, "edge_rows": w.edges.num_rows,
                    "backends": {}, "baselines": {}, "indices": {}}
    sets = expected = None
    for b in backends:
        warm_up(b, w.edges, s)
        idx, build = bench_build(w.edges, b, s, say)
        if sets is None:
            sets = query_sets(w.edges, idx.ids.keys, s["queries"], s["seed"])
            result["vertices"] = idx.n_vertices
        per_backend = {"build": build, "queries": {}}
        answers = {}
        release = getattr(idx.kernels, "release_buffers", None)
        if release is not None:
            release()  # the queries' own buffers are measured below
        with PoolGrowth(b == "gpu") as qmem:
            for name, pairs in sets.items():
                eng, answers[name] = bench_engine(idx, pairs)
                per_backend["queries"].setdefault("grail_duckdb", {})[name] = eng
                say(f"  {b} {name}: {eng['seconds'] * 1e3:.1f} ms for {len(pairs):,} pairs "
                    f"({eng['reachable_fraction']:.1%} reachable, "
                    f"{eng['stats']['searched']:,} searched)")
            if s.get("scale"):
                rnd = per_backend["queries"]["grail_duckdb"]["random"]
                per_backend["scale"] = bench_scale(idx, idx.ids.keys, sets["reachable"],
                                                   rnd["seconds"], rnd["total_pairs"], s, say)
        if b == "gpu":
            per_backend["query_memory"] = query_memory(idx, qmem)
            q = per_backend["query_memory"]
            say(f"  gpu query scratch: peak {q['scratch_bytes'] / 2**20:.1f} MiB beyond the "
                f"index ({q['footprint_bytes'] / 2**20:.1f} MiB) and the reverse DAG "
                f"({q['reverse_dag_bytes'] / 2**20:.1f} MiB): {q['scratch_fraction']:.1%}")
        if expected is None:
            expected = answers
        else:
            for name in sets:
                if not np.array_equal(expected[name], answers[name]):
                    raise AssertionError(f"{w.name}: backends disagree on {name} pairs")
        per_backend["gteps"] = bench_traversal(idx, w.edges, s["roots"], s["seed"])
        for graph, g in per_backend["gteps"].items():
            say(f"  {b} traversal of the {graph}: {g['roots']} roots, {g['edges']:,} edges, "
                f"{(g['gteps'] or 0):.3f} GTEPS")
        if s["baselines"]:
            for name, pairs in sets.items():
                m = bench_plain_bfs(idx, pairs, expected[name], s["budget"])
                per_backend["queries"].setdefault("plain bitmask BFS (no cuts)", {})[name] = m
                say(f"  {b} plain bitmask BFS {name}: {m['seconds'] * 1e3:.1f} ms"
                    f"{' (sampled)' if m['sampled'] else ''}")
            sql = bench_sql(w.edges, sets, expected, b, s)
            per_backend["sql_note"] = sql.pop("_note", None)
            build["sql_grail_index_seconds"] = sql.pop("_build_seconds", None)
            if build["sql_grail_index_seconds"] is not None:
                say(f"  {b} SQL grail_index build: {build['sql_grail_index_seconds']:.2f} s")
            per_backend["queries"].update(sql)
        result["backends"][b] = per_backend
        if s.get("bfl") and "BFL" not in result["indices"]:
            bfl = result["indices"]["BFL"] = run_bfl(s["bfl"], idx, sets, expected)
            say(f"  BFL (one core): build {bfl['build_seconds'] * 1e3:.1f} ms, random "
                f"{bfl['random_seconds'] * 1e3:.2f} ms, reachable "
                f"{bfl['reachable_seconds'] * 1e3:.2f} ms"
                f"{'' if bfl['agree'] else ' ANSWERS DIFFER'}")
        del idx
    if s["baselines"]:
        result["baselines"] = bench_baselines(w, sets, expected, s, say)
    return result


def bench_baselines(w: Workload, sets, expected, s: dict, say) -> dict:
    """NetworkX, SciPy and the recursive CTE per pair (sampled), and the identity UDF floor."""
    src, dst = as_column(w.edges.column("src")), as_column(w.edges.column("dst"))
    out = {}
    probes = {"networkx has_path": 50, "scipy BFS": 20, "duckdb recursive CTE": 3}
    for cls in bl.PER_PAIR:
        base = cls(s["threads"]) if cls is bl.DuckDBCteBaseline else cls()
        t0 = time.perf_counter()
        base.prepare(src, dst)
        entry = {"setup_seconds": time.perf_counter() - t0}
        for name, pairs in sets.items():
            m = bl.measure(base.answer, as_column(pairs.column("src")), as_column(pairs.column("dst")), expected[name],
                           budget=s["budget"], probe=probes[base.name])
            entry[name] = m.as_dict()
            say(f"  {base.name} {name}: {m.seconds * 1e3:,.0f} ms for {m.total:,} pairs"
                f"{f' (scaled from {m.run_pairs:,})' if m.sampled else ''}"
                f"{'' if m.agree else ' ANSWERS DIFFER'}")
        if hasattr(base, "close"):
            base.close()
        del base
        out[cls.name] = entry
    out["identity arrow UDF (floor)"] = bench_identity(sets, s)
    return out


def machine_info() -> dict:
    """The date (UTC), CPU model and cores, memory, GPU name, library versions."""
    cpu = platform.processor() or platform.machine()
    try:
        with open("/proc/cpuinfo") as f:
            names = [ln.split(":", 1)[1].strip() for ln in f if ln.startswith("model name")]
        cpu = names[0] if names else cpu
    except OSError:
        pass
    info = {"date": time.strftime("%Y-%m-%d", time.gmtime()),
            "cpu": cpu, "cores": os.cpu_count(), "python": platform.python_version(),
            "duckdb": duckdb.__version__, "numba": numba.__version__, "numpy": np.__version__,
            "pyarrow": pa.__version__, "gpu": None,
            "load_average_at_start": _load_average()}
    try:
        info["memory_gib"] = round(os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
                                   / 2**30, 1)
    except (ValueError, OSError):
        info["memory_gib"] = None
    if gpu_available():
        import cupy

        props = cupy.cuda.runtime.getDeviceProperties(0)
        info["gpu"] = props["name"].decode() if isinstance(props["name"], bytes) else props["name"]
        info["cupy"] = cupy.__version__
    return info


def _load_average():
    """The 1-minute load average when the run began: other work on the machine skews times."""
    try:
        return round(os.getloadavg()[0], 2)
    except (AttributeError, OSError):
        return None


def _json_default(x):
    if isinstance(x, (np.integer,)):
        return int(x)
    if isinstance(x, (np.floating,)):
        return float(x)
    if isinstance(x, Path):
        return str(x)
    raise TypeError(f"not JSON serialisable: {type(x)}")
