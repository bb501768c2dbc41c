"""The path functions and the reach counts against issue 42's targets: ``python -m benchmarks
paths``.

``python -m benchmarks paths --graph gen:citation:3774768 cit-HepTh --backend gpu cpu
[--pairs 100000] [--repeat 3] [--cte-sample 20] [--counts exact approx] [--out DIR]
[--name paths]`` measures, for every graph (a dataset by name, an edge file, or a generator
``gen:citation:N[:MEAN]``, ``gen:random:N:DEGREE``, ``gen:rmat:SCALE[:FACTOR]``) and backend:

* ``reaches_within(k = 3)``, ``hops`` and ``reaches_path`` (``GrailIndex.reaches_within``,
  ``.hops``, ``.path``) on ``--pairs`` uniform random pairs and as many reachable pairs
  (random walks, :mod:`benchmarks.workloads`): the first call apart (it makes the path graph
  that later calls keep), then the best of ``--repeat`` calls (one where a call takes over
  ``--repeat-below`` seconds);
* ``grail_reach_counts`` (``GrailIndex.reach_counts``), exact and approximate. Exact only where
  the engine's own ``mode='auto'`` counts exactly (the sweep's work within the backend's budget,
  ``CountSettings``), unless ``--force-exact``. The approximate counts are checked against the
  exact ones on every vertex where both ran, else against a breadth-first search from each of
  ``--check-sample`` random vertices (as many as fit ``--check-budget`` seconds);
* DuckDB's recursive CTE with ``USING KEY`` (:class:`benchmarks.baselines.DuckDBCtePaths`) on
  the first ``--cte-sample`` pairs of each set (within ``--cte-budget`` seconds a function and
  set, each query stopped after ``--cte-cap`` seconds), its time scaled to the whole set, as
  the bench scales its per-pair baselines.

Every answer is checked, and a failed check fails the run (after the report is written): the
backends' answers are equal, pair by pair and vertex by vertex; every path of every call is
followed edge by edge (src first, dst last, hops + 1 keys, each step an edge of the graph) and
``reaches_within`` is ``hops <= k``; the CTE's answers on its sample are the engine's (a
query it stopped is left out). Warm-up (kernel compiles) runs on a prefix of the graph before
any timer. ``--via-parquet DIR``: a generated citation graph is written as Parquet files there
and the build reads the folder, as the scale bench does (graphs too large to hold twice).

Writes ``NAME.json`` (``"kind": "paths"``) into ``--out`` after every step, so a run cut short
keeps what it measured; copy it to ``benchmarks/results/`` under a name that says the machine,
and ``python -m benchmarks docs`` renders it with :func:`render`.
"""
from __future__ import annotations

import argparse
import json
import shutil
import subprocess
import sys
import time
from pathlib import Path

import numba
import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from grail_duckdb.engine import reach_counts as rc
from grail_duckdb.engine.build import build_index
from grail_duckdb.engine.paths import UNBOUNDED, path_graph
from grail_duckdb.progress import silenced
from grail_duckdb.tools.generators import citation_dag, write_citation_parquet

from . import baselines as bl
from .bench import (_json_default, check_workload, load_workload, machine_info, query_sets,
                    warm_up as warm_up_reaches)
from .memory import PeakMemory, free_device
from .paths_report import (COUNT_TARGETS, CPU_GPU_TARGET, CTE_TARGET, FUNCTIONS, K, TARGETS,
                           WITHIN_2_SIGMA, render)
from .report import publish
from .scale import _flush_to_disk
from .scale import warm_up as warm_up_parquet
from .workloads import reachable_pairs

__all__ = ["add_arguments", "render", "run", "TARGETS", "COUNT_TARGETS"]

ROOT = Path(__file__).resolve().parent.parent
#: the pairs of the warm-up's large call (a timed call's 100K and more)
WARM_UP_PAIRS = 131_072


def _say(msg: str) -> None:
    print(msg, file=sys.stderr, flush=True)


def _call(idx, function: str, src, dst):
    """One call of a path function on whole columns."""
    if function == "reaches_within":
        return idx.reaches_within(src, dst, K)
    return idx.hops(src, dst) if function == "hops" else idx.path(src, dst)


# ----------------------------------------------------------------------------------------------
# warm-up, graphs
# ----------------------------------------------------------------------------------------------
def warm_up(backend: str, edges: pa.Table | None, workdir: Path | None) -> float:
    """Compile (or load) every kernel the timed calls use, on a prefix of the graph (a small
    citation graph where the graph is only on disk: then the Parquet build's path too); its
    seconds."""
    t0 = time.perf_counter()
    if edges is None:
        warm_up_parquet(backend, workdir, papers=200_000)
        edges = citation_dag(20_000, mean_citations=10, seed=1)
    table = edges.slice(0, min(edges.num_rows, 50_000))
    warm_up_reaches(backend, table)
    idx = build_index(table, backend=backend, progress=False)
    walks = reachable_pairs(table, WARM_UP_PAIRS, seed=1)
    for pairs in (walks, walks.slice(0, 1_000)):  # a GPU's large calls and its host copy's
        for function in FUNCTIONS:
            _call(idx, function, pairs.column("src"), pairs.column("dst"))
    for mode in ("exact", "approximate"):
        idx.reach_counts(mode)
    g = path_graph(idx)
    for rows in (g.fwd, g.rev):
        idx.kernels.bounded_bfs(rows, 0, UNBOUNDED)
    return time.perf_counter() - t0


def _load(spec: str, args) -> dict:
    """The graph of ``spec``: ``{name, source (what the build reads), edges (a Table, or None
    while only on disk), generate: {seconds, ...}}``."""
    t0 = time.perf_counter()
    parts = spec.split(":")
    if args.via_parquet and parts[:2] == ["gen", "citation"]:
        folder = Path(args.via_parquet) / spec.replace(":", "-")
        shutil.rmtree(folder, ignore_errors=True)
        mean = {"mean_citations": float(parts[3])} if len(parts) > 3 else {}
        info = write_citation_parquet(folder, int(float(parts[2])), seed=args.seed, **mean)
        info["flush_seconds"] = _flush_to_disk()
        return {"name": spec[4:], "source": folder, "edges": None, "folder": folder,
                "generate": info}
    w = load_workload(spec, args.seed)
    return {"name": w.name, "source": w.edges, "edges": w.edges,
            "generate": {"seconds": time.perf_counter() - t0, "edges": w.edges.num_rows}}


# ----------------------------------------------------------------------------------------------
# the checks
# ----------------------------------------------------------------------------------------------
class EdgeSet:
    """The graph's edges as sorted codes ``src_id * n + dst_id`` over keys numbered apart from
    the engine (:func:`benchmarks.baselines.dense_ids`), to follow paths step by step.

    >>> g = EdgeSet(pa.table({"src": ["a", "b"], "dst": ["b", "c"]}))
    >>> g.has(g.encode(pa.array(["a", "b", "a", "x"])), g.encode(pa.array(["b", "c", "c", "a"])))
    array([ True,  True, False, False])
    """

    def __init__(self, edges: pa.Table):
        src, dst = edges.column("src"), edges.column("dst")
        keys, self.encode = bl.dense_ids(src, dst)
        self.n = len(keys)
        self.codes = np.unique(self.encode(src) * self.n + self.encode(dst))

    def has(self, a: np.ndarray, b: np.ndarray) -> np.ndarray:
        code = a * self.n + b
        at = np.minimum(np.searchsorted(self.codes, code), max(self.codes.shape[0] - 1, 0))
        return (a >= 0) & (b >= 0) & (self.codes.shape[0] > 0) & (self.codes[at] == code)


def check_paths(graph: EdgeSet, pairs: pa.Table, answers: dict) -> dict:
    """Every path of the call, followed edge by edge: NULL exactly where hops is NULL; hops + 1
    keys; src first, dst last; each step an edge; and reaches_within = hops <= K.

    >>> graph = EdgeSet(pa.table({"src": [1, 2], "dst": [2, 3]}))
    >>> pairs = pa.table({"src": [1, 1, 3], "dst": [3, 2, 1]})
    >>> right = {"hops": pa.array([2, 1, None], pa.int32()),
    ...          "reaches_path": pa.array([[1, 2, 3], [1, 2], None]),
    ...          "reaches_within": pa.array([True, True, False])}
    >>> check_paths(graph, pairs, right)
    {'paths': 2, 'steps': 3, 'ok': True, 'failed': []}
    >>> check_paths(graph, pairs, dict(right, reaches_path=pa.array([[1, 3], [1, 2], None])))
    {'paths': 2, 'steps': 2, 'ok': False, 'failed': ['hops + 1 keys', 'every step an edge']}
    """
    hops, paths = answers["hops"], answers["reaches_path"]
    h = hops.fill_null(-1).to_numpy(zero_copy_only=False).astype(np.int64)
    lens = pc.list_value_length(paths).fill_null(0).to_numpy(zero_copy_only=False)
    lens = lens.astype(np.int64)
    has = lens > 0
    vals = graph.encode(pc.list_flatten(paths))
    ends = np.cumsum(lens)
    first, last = ends[has] - lens[has], ends[has] - 1
    src, dst = (graph.encode(pairs.column(c).combine_chunks().filter(pa.array(has)))
                for c in ("src", "dst"))
    step = np.ones(vals.shape[0], np.bool_)
    step[ends[has] - 1] = False          # a path's last key starts no step
    at = np.flatnonzero(step)
    edges_ok = graph.has(vals[at], vals[np.minimum(at + 1, max(vals.shape[0] - 1, 0))])
    within = answers["reaches_within"].to_numpy(zero_copy_only=False).astype(np.bool_)
    checks = {
        "null where hops is null": bool(np.array_equal(~has, h < 0)),
        "hops + 1 keys": bool(np.array_equal(lens[has], h[has] + 1)),
        "src first, dst last": bool(np.array_equal(vals[first], src)
                                    and np.array_equal(vals[last], dst)),
        "every step an edge": bool(edges_ok.all()),
        f"reaches_within = hops <= {K}": bool(np.array_equal(within, (h >= 0) & (h <= K))),
    }
    return {"paths": int(has.sum()), "steps": int(at.shape[0]), "ok": all(checks.values()),
            "failed": [k for k, v in checks.items() if not v]}


def _summary(answers: dict) -> dict:
    """What the answers are: the share of pairs with a path, their mean hops, the share within
    K hops."""
    h = answers["hops"].to_numpy(zero_copy_only=False)
    found = ~np.isnan(h) if h.dtype.kind == "f" else np.ones(h.shape[0], np.bool_)
    within = answers["reaches_within"].to_numpy(zero_copy_only=False).astype(np.bool_)
    return {"reachable_share": float(found.mean()) if h.shape[0] else 0.0,
            "mean_hops": float(h[found].mean()) if found.any() else None,
            "within_share": float(within.mean()) if within.shape[0] else 0.0}


# ----------------------------------------------------------------------------------------------
# measuring
# ----------------------------------------------------------------------------------------------
def bench_calls(idx, pairs: pa.Table, repeat: int, below: float) -> tuple[dict, dict]:
    """The three functions on one pair set: ``({function: figures}, {function: answers})``;
    calls under ``below`` seconds are repeated ``repeat`` times (the best kept)."""
    src, dst = pairs.column("src"), pairs.column("dst")
    out, answers = {}, {}
    for function in FUNCTIONS:
        t0 = time.perf_counter()
        _call(idx, function, src, dst)  # untimed: the path graph is made, the host copy too
        first = time.perf_counter() - t0
        seconds, answers[function] = bl.best_of(lambda f=function: _call(idx, f, src, dst),
                                                repeat, short=below)
        out[function] = {"seconds": seconds, "first_call_seconds": first,
                         "pairs": len(pairs)}
    return out, answers


def bench_counts(idx, modes: list[str], args, say, exact=None,
                 edges=None) -> tuple[dict, dict]:
    """Exact and approximate reach counts, timed and checked: ``(figures, {mode: Table})``.
    ``exact``: the exact counts of another backend on the same graph, the approximate ones'
    check where this backend does not count exactly."""
    backend = idx.backend
    out, tables = {}, {}
    work = rc.exact_work(idx)
    budget = rc.CountSettings().exact_budget(backend)
    for mode in ("exact", "approximate"):
        if mode[:6] not in [m[:6] for m in modes]:
            continue
        if mode == "exact" and work > budget and not args.force_exact:
            out[mode] = {"skipped": f"the exact sweep's {work:.3g} word operations exceed the "
                                    f"{backend} budget {budget:.3g} (CountSettings: mode="
                                    "'auto' counts approximately here)", "work": work}
            say(f"  {backend} exact counts skipped: {out[mode]['skipped']}")
            continue
        with PeakMemory(gpu=backend == "gpu") as mem:
            seconds, tables[mode] = bl.best_of(lambda m=mode: idx.reach_counts(m), args.repeat)
        ran = tables[mode].column("mode")[0].as_py() if tables[mode].num_rows else mode
        out[mode] = {"seconds": seconds, "mode_ran": ran, "work": work,
                     "rel_error": (tables[mode].column("rel_error")[0].as_py()
                                   if tables[mode].num_rows else 0.0),
                     "precision": _precision_of(tables[mode]),
                     "gpu_pool_peak_bytes": mem.as_dict()["gpu_pool_peak_bytes"]}
        say(f"  {backend} {mode} counts: {seconds:.3f} s")
    if "approximate" in tables:
        free_device(backend)  # the sketches' registers: room for the checks' searches
        out["approximate"]["check"] = check_estimates(
            idx, tables["approximate"], tables.get("exact", exact), args)
        c = out["approximate"]["check"]
        say(f"  {backend} approximate counts against {c['against']}: RMS relative error "
            f"{c['rms']:.4f} ({c['values']:,} values), stated "
            f"{out['approximate']['rel_error']:.4f}")
        known = tables.get("exact", exact)
        if args.hash_draws and known is not None and edges is not None:
            d = out["approximate"]["draws"] = hash_draws(edges, idx.ids.keys, known, backend,
                                                         args)
            say(f"  {backend} approximate counts over {d['draws']} hash draws: RMS relative "
                f"error {d['rms']:.4f}, {d['within_2_sigma']:.1%} within twice the stated")
    return out, tables


def hash_draws(edges: pa.Table, keys: pa.Array, exact: pa.Table, backend: str, args) -> dict:
    """The approximate counts' error over ``--hash-draws`` draws of the sketches' hash, the
    frame in which a stated standard error holds: each draw relabels the vertices by a seeded
    permutation of their keys (a vertex's hash is that of its id, and the ids follow the
    keys), builds and counts again, and compares each vertex's estimates with its exact
    counts. One draw's values share most of their error (their sets nest), so a single run
    tests one draw; the pooled values test the statement."""
    n = len(keys)
    where = {c: pc.index_in(edges.column(c), keys).to_numpy() for c in ("src", "dst")}
    at = pc.index_in(exact.column("key"), keys).to_numpy()
    truth = np.empty((2, n), np.int64)
    for i, c in enumerate(("reaches", "reached_by")):
        truth[i, at] = exact.column(c).to_numpy() + 1
    rng = np.random.default_rng(args.seed + 11)
    per, pooled = [], []
    for _ in range(args.hash_draws):
        perm = rng.permutation(n)
        idx = build_index(perm[where["src"]], perm[where["dst"]], backend=backend,
                          progress=False)
        got = idx.reach_counts("approximate")
        back = np.argsort(perm)[got.column("key").to_numpy()]
        est = np.stack([got.column(c).to_numpy() + 1 for c in ("reaches", "reached_by")])
        sigma, precision = got.column("rel_error")[0].as_py(), _precision_of(got)
        t = truth[:, back]
        rel = ((est - t) / t)[t > 2.5 * (1 << precision)]
        per.append({"mean": float(rel.mean()), "rms": float(np.sqrt(np.mean(rel * rel))),
                    "within_2_sigma": float(np.mean(np.abs(rel) <= 2 * sigma))})
        pooled.append(np.abs(rel))
        del idx
        free_device(backend)
    r = np.concatenate(pooled)
    share = float(np.mean(r <= 2 * sigma))
    return {"draws": args.hash_draws, "values": int(r.shape[0]),
            "rms": float(np.sqrt(np.mean(r * r))), "within_2_sigma": share,
            "within_bound": share >= WITHIN_2_SIGMA, "per_draw": per}


def _precision_of(counts: pa.Table) -> int:
    """The sketches' precision of a count (its ``rel_error``; the default where it ran
    exactly or is empty): a device too small for the default steps it down."""
    err = counts.column("rel_error")[0].as_py() if counts.num_rows else 0.0
    if not err:
        return rc.DEFAULT_PRECISION
    return next(p for p in rc.PRECISIONS if abs(rc.relative_error(p) - err) < 1e-12)


def check_estimates(idx, approx: pa.Table, exact: pa.Table | None, args) -> dict:
    """The observed error of the estimates of ``reaches + 1`` and ``reached_by + 1`` (the sets
    the sketches count, the vertex itself in them): against the exact counts on every vertex
    where they ran, else against a breadth-first search from each of ``--check-sample`` random
    vertices (within ``--check-budget`` seconds). ``rms``: the root mean square of the relative
    errors; ``large``: the same over the values above 2.5 * 2**precision, where the sketch's
    raw estimate (whose stated relative standard error it is) applies rather than linear
    counting. ``within_bound``: at least :data:`WITHIN_2_SIGMA` of those values lie within
    twice the stated relative standard error, as a normal error's 95.4% do (the RMS alone
    judges poorly: the sets of a graph nest, so their errors are far from independent)."""
    est = np.stack([approx.column(c).to_numpy() for c in ("reaches", "reached_by")]) + 1
    if exact is not None:
        truth = np.stack([exact.column(c).to_numpy() for c in ("reaches", "reached_by")]) + 1
        against, est = "the exact counts, every vertex", est.ravel()
        truth = truth.ravel()
    else:
        rng = np.random.default_rng(args.seed + 7)
        picks = rng.choice(idx.n_vertices, min(args.check_sample, idx.n_vertices), replace=False)
        got, t0 = [], time.perf_counter()
        g = path_graph(idx)
        for v in picks:  # the vertices v reaches and that reach v, itself in both
            got.append((int(v), *(idx.kernels.bounded_bfs(rows, int(v), UNBOUNDED)[0].shape[0]
                                  for rows in (g.fwd, g.rev))))
            if time.perf_counter() - t0 > args.check_budget:
                break
        rows = np.array([g[0] for g in got], np.int64)
        truth = np.array([[g[1] for g in got], [g[2] for g in got]], np.int64).ravel()
        est = est[:, rows].ravel()
        against = (f"a breadth-first search from each of {len(got)} random vertices "
                   f"({time.perf_counter() - t0:.1f} s)")
    rel = np.abs(est - truth) / truth
    precision = _precision_of(approx)
    large = truth > 2.5 * (1 << precision)
    sigma = rc.relative_error(precision)

    def stats(r):
        return {"values": int(r.shape[0]),
                "rms": float(np.sqrt(np.mean(r * r))) if r.shape[0] else None,
                "p50": float(np.median(r)) if r.shape[0] else None,
                "p99": float(np.percentile(r, 99)) if r.shape[0] else None,
                "max": float(r.max()) if r.shape[0] else None,
                "within_2_sigma": float(np.mean(r <= 2 * sigma)) if r.shape[0] else None}

    out = {"against": against, **stats(rel), "large": stats(rel[large])}
    judged = out["large"] if out["large"]["values"] else out
    out["within_bound"] = bool(judged["values"]) and judged["within_2_sigma"] >= WITHIN_2_SIGMA
    return out


def bench_cte(edges: pa.Table, sets: dict, answers: dict, args, say) -> dict:
    """The recursive CTE per pair on the first ``--cte-sample`` pairs of each set, scaled;
    its answers compared with the engine's (``answers``: set -> function -> Array)."""
    base = bl.DuckDBCtePaths(args.threads, args.cte_cap)
    t0 = time.perf_counter()
    base.prepare(edges.column("src"), edges.column("dst"))
    out = {"setup_seconds": time.perf_counter() - t0, "threads": base.threads,
           "cap_seconds": args.cte_cap, "sets": {}}
    query = {"reaches_within": "within", "hops": "hops", "reaches_path": "path"}
    for name, pairs in sets.items():
        n = min(args.cte_sample, len(pairs))
        src = pairs.column("src").slice(0, n).to_pylist()
        dst = pairs.column("dst").slice(0, n).to_pylist()
        for function in FUNCTIONS:
            want = answers[name][function].slice(0, n).to_pylist()
            spent, stopped, agree, run = 0.0, 0, True, 0
            for s, t, w in zip(src, dst, want):
                got, seconds = base.answer_one(query[function], s, t,
                                               K if function == "reaches_within" else None)
                spent += seconds
                run += 1
                if got is base.STOPPED:
                    stopped += 1
                elif got != w:
                    agree = False
                if spent > args.cte_budget:
                    break
            per_pair = spent / max(run, 1)
            out["sets"].setdefault(name, {})[function] = {
                "seconds": per_pair * len(pairs), "per_pair_seconds": per_pair,
                "run_pairs": run, "total_pairs": len(pairs), "stopped": stopped,
                "agree": agree, "lower_bound": stopped > 0}
            say(f"  CTE {function} {name}: {per_pair * 1e3:,.1f} ms a pair over {run} pairs "
                f"({stopped} stopped){'' if agree else ' ANSWERS DIFFER'}")
    base.close()
    return out


def bench_graph(spec: str, args, say, partial) -> dict:
    """One graph on every backend: calls, counts, checks, then the CTE."""
    g = _load(spec, args)
    rec: dict = {"name": g["name"], "spec": spec, "generate": g["generate"], "backends": {}}
    say(f"{g['name']}: {g['generate']['edges']:,} edges in {g['generate']['seconds']:.1f} s")
    sets: dict = {}
    answers: dict = {}
    counts: dict = {}
    graph = None
    failures = []
    try:
        for b in args.backend:
            rec["backends"][b] = per = {}
            per["warm_up_seconds"] = warm_up(b, g["edges"], Path(args.workdir))
            free_device(b)
            t0 = time.perf_counter()
            idx = build_index(g["source"], backend=b, progress=False)
            per["build_seconds"] = time.perf_counter() - t0
            rec.update(vertices=idx.n_vertices, edges=idx.edge_rows,
                       components=idx.n_components, dag_edges=idx.dag.m)
            say(f"  {b} build: {per['build_seconds']:.2f} s ({idx.n_vertices:,} vertices, "
                f"{idx.n_components:,} components)")
            free_device(b)
            if args.pairs and not sets:
                if g["edges"] is None:
                    g["edges"] = pq.read_table(g["folder"]).select([0, 1]).rename_columns(
                        ["src", "dst"])
                sets = query_sets(g["edges"], idx.ids.keys, args.pairs, args.seed)
                graph = EdgeSet(g["edges"])
            answers[b] = {}
            for name, pairs in sets.items():
                per.setdefault("calls", {})[name], answers[b][name] = bench_calls(
                    idx, pairs, args.repeat, args.repeat_below)
                per.setdefault("answers", {})[name] = _summary(answers[b][name])
                check = per.setdefault("path_check", {})[name] = check_paths(
                    graph, pairs, answers[b][name])
                if not check["ok"]:
                    failures.append(f"{b} {name} paths: {', '.join(check['failed'])}")
                say(f"  {b} {name}: " + ", ".join(
                    f"{f} {v['seconds'] * 1e3:,.1f} ms" for f, v in per["calls"][name].items())
                    + f"; {check['paths']:,} paths, {check['steps']:,} steps checked: "
                    + ("ok" if check["ok"] else "FAILED"))
            partial(rec)
            if args.counts != ["none"]:
                known = next((c["exact"] for c in counts.values() if "exact" in c), None)
                per["counts"], counts[b] = bench_counts(idx, args.counts, args, say, known,
                                                        g["edges"])
                c = per["counts"].get("approximate", {}).get("check")
                if c is not None and not c["within_bound"]:
                    say(f"  {b}: the observed error exceeds the stated bound")
            partial(rec)
            del idx
            free_device(b)
        rec["identical"] = _identical(answers, counts, failures)
        partial(rec)
        if sets and args.cte_sample:
            first = next(iter(answers))
            rec["cte"] = bench_cte(g["edges"], sets, answers[first], args, say)
            failures += [f"CTE {n} {f}: answers differ" for n, per in rec["cte"]["sets"].items()
                         for f, v in per.items() if not v["agree"]]
    finally:
        if g.get("folder") is not None:
            shutil.rmtree(g["folder"], ignore_errors=True)
    rec["failures"] = failures
    return rec


def _identical(answers: dict, counts: dict, failures: list) -> dict:
    """Whether the backends' answers are equal, per pair set and per count mode."""
    out = {}
    if len(answers) < 2:
        return out
    (a, x), (b, y) = list(answers.items())[:2]
    for name in x:
        out[name] = all(x[name][f].equals(y[name][f]) for f in FUNCTIONS)
    for mode in ("exact", "approximate"):
        if mode in counts.get(a, {}) and mode in counts.get(b, {}):
            out[f"counts {mode}"] = counts[a][mode].equals(counts[b][mode])
    failures += [f"{a} and {b} differ on {k}" for k, v in out.items() if not v]
    return out


# ----------------------------------------------------------------------------------------------
# the command
# ----------------------------------------------------------------------------------------------
def add_arguments(p: argparse.ArgumentParser) -> argparse.ArgumentParser:
    """Register the options of ``python -m benchmarks paths`` on ``p``."""
    p.add_argument("--graph", nargs="+", default=["cit-HepTh"], metavar="SPEC",
                   help="dataset names, edge files or gen:citation:N[:MEAN], "
                        "gen:random:N:DEGREE, gen:rmat:SCALE[:FACTOR] (default cit-HepTh)")
    p.add_argument("--backend", nargs="+", choices=("cpu", "gpu"), default=["cpu"],
                   help="backends, in the order they run (default cpu)")
    p.add_argument("--pairs", type=int, default=100_000,
                   help="pairs per set, random and reachable (default 100000; 0: counts only)")
    p.add_argument("--repeat", type=int, default=3,
                   help="timed calls after the first (the best kept; default 3)")
    p.add_argument("--repeat-below", type=float, default=30.0, metavar="SECONDS",
                   help="calls longer than this run once (default 30)")
    p.add_argument("--counts", nargs="+", choices=("exact", "approx", "none"),
                   default=["exact", "approx"], help="reach counts to run (default both)")
    p.add_argument("--force-exact", action="store_true",
                   help="count exactly also past the backend's budget")
    p.add_argument("--check-sample", type=int, default=32,
                   help="vertices whose counts a breadth-first search checks where no exact "
                        "counts ran (default 32)")
    p.add_argument("--check-budget", type=float, default=60.0,
                   help="seconds of those searches (default 60)")
    p.add_argument("--hash-draws", type=int, default=0, metavar="N",
                   help="where exact counts ran: the approximate counts' error over N draws "
                        "of the sketches' hash as well (default 0)")
    p.add_argument("--cte-sample", type=int, default=20,
                   help="pairs of each set the recursive CTE answers (default 20; 0: none)")
    p.add_argument("--cte-cap", type=float, default=10.0,
                   help="seconds before a CTE query is stopped (default 10)")
    p.add_argument("--cte-budget", type=float, default=60.0,
                   help="seconds of CTE queries per function and set (default 60)")
    p.add_argument("--threads", type=int, default=0,
                   help="DuckDB threads of the CTE (default 0: every core)")
    p.add_argument("--via-parquet", metavar="DIR", default=None,
                   help="write generated citation graphs as Parquet here, build from the folder")
    p.add_argument("--workdir", default="paths-work", help="scratch of the Parquet warm-up")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--out", default="bench-paths", help="folder of NAME.json")
    p.add_argument("--name", default="paths", help="the report's file name, without .json")
    return p


def run(args) -> int:
    """Every graph; ``--out/NAME.json`` after every step; the Markdown printed. Exit status 1
    when a check failed."""
    for spec in args.graph:
        check_workload(spec)
    commit = subprocess.run(["git", "-C", str(ROOT), "rev-parse", "--short", "HEAD"],
                            capture_output=True, text=True).stdout.strip() or None
    machine = machine_info()
    machine["numba_threads"] = numba.config.NUMBA_NUM_THREADS
    report = {"kind": "paths", "command": "python -m benchmarks paths " + " ".join(sys.argv[2:]),
              "machine": machine, "commit": commit,
              "settings": {k: v for k, v in vars(args).items() if k not in ("func", "command")},
              "k": K, "targets": {"calls_seconds": TARGETS, "cpu_gpu": CPU_GPU_TARGET,
                                  "cte_speedup": CTE_TARGET,
                                  "counts_seconds": [[*k, v] for k, v in COUNT_TARGETS.items()]},
              "graphs": []}
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)

    def partial(current):
        kept = dict(report, graphs=report["graphs"] + [current])
        (out / f"{args.name}.json").write_text(json.dumps(kept, indent=1, default=_json_default))

    with silenced():  # the engine's progress lines of long calls: the bench says its own
        for spec in args.graph:
            report["graphs"].append(bench_graph(spec, args, _say, partial))
    report = json.loads(json.dumps(report, default=_json_default))
    publish(report, out, args.name, render)
    failed = [f for g in report["graphs"] for f in g["failures"]]
    for f in failed:
        _say(f"CHECK FAILED: {f}")
    return 1 if failed else 0

