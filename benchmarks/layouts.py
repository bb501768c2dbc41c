"""Query key layouts and the per-chunk SQL path: what a call costs by how its keys arrive.

``python -m benchmarks layouts [--workloads citeseer] [--pairs 100000 1000000] [--backend
cpu|gpu] [--threads 1 0] [--out DIR]`` measures, for every workload:

* **layouts**: one ``GrailIndex.reaches`` call of N uniform random pairs whose keys arrive as
  NumPy arrays of each integer type, a strided view (a column of an ``(N, 2)`` array), an
  Arrow array, a chunked Arrow array, a pandas Series, and as DuckDB hands them over (a
  relation of INTEGER keys: its own execution, which is DuckDB's, timed apart and taken off),
  each against the same keys as contiguous int64, timed in the same rounds (best of
  ``--repeat``, the layouts in a rotated order each round). The 8- and 16-bit layouts draw
  their keys from the vertices whose keys fit the type, against int64 arrays of those keys;
* **per chunk**: ``count(*) FILTER (WHERE reaches(a, b))`` over N pairs held in a DuckDB table,
  every call per DuckDB chunk (``grail_duckdb.per_chunk``), beside the identity arrow UDF (an
  arrow function returning ``a = b`` over the same pairs: DuckDB's floor for any Python
  function) and the whole-column statement, at each ``--threads`` (0: every core).

The report (``layouts.json``, ``"kind": "layouts"``) goes to ``--out``; copy it to
``benchmarks/results/`` under a name that says the machine and backend, and ``python -m
benchmarks docs`` renders it with :func:`render`.
"""
from __future__ import annotations

import argparse
import os
import sys
import time

import duckdb
import numba
import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.compute as pc

import grail_duckdb as gd
from grail_duckdb.plugin import install, per_chunk

from . import baselines as bl
from .bench import load_workload, machine_info
from .report import publish
from .workloads import random_pairs

__all__ = ["add_arguments", "layout_costs", "per_chunk_costs", "render", "run"]

#: Arrow chunks of the chunked layout (DuckDB hands 1M rows over in 8 chunks)
CHUNKS = 8
#: the narrow integer types, measured on keys that fit them
NARROW = ("int16", "uint16", "int8", "uint8")


def _say(msg: str) -> None:
    print(msg, file=sys.stderr, flush=True)


def _layouts(s: np.ndarray, d: np.ndarray, con) -> dict:
    """Layout name -> ``(source column, destination column)`` of the same keys ``s``, ``d``
    (int64); DuckDB's relations read a table ``layout_pairs`` made here."""
    wide = np.stack([s, d], axis=1)
    chunk = -(-s.shape[0] // CHUNKS)
    con.register("layout_view", pa.table({"a": s.astype(np.int32), "b": d.astype(np.int32)}))
    con.execute("CREATE OR REPLACE TABLE layout_pairs AS SELECT * FROM layout_view")
    con.unregister("layout_view")
    fetched = [con.sql(f"SELECT {c} FROM layout_pairs").to_arrow_table().column(0)
               for c in "ab"]
    return {
        "int64": (s, d),
        "int32": (s.astype(np.int32), d.astype(np.int32)),
        "uint32": (s.astype(np.uint32), d.astype(np.uint32)),
        "uint64": (s.astype(np.uint64), d.astype(np.uint64)),
        "strided int64 view": (wide[:, 0], wide[:, 1]),
        "Arrow int64": (pa.array(s), pa.array(d)),
        "chunked Arrow int64 (8 chunks)": tuple(pa.chunked_array([x[i:i + chunk] for i in range(
            0, x.shape[0], chunk)]) for x in (s, d)),
        "pandas Series": (pd.Series(s), pd.Series(d)),
        "DuckDB INTEGER, as fetched": tuple(fetched),
        "DuckDB relation": tuple(con.sql(f"SELECT {c} FROM layout_pairs") for c in "ab"),
    }


class _Best:
    """The best wall-clock and the best CPU time (of the whole process: every thread) seen
    per name. On a machine others share, the wall time of a call is its CPU time plus
    whatever the scheduler gave to others; the CPU time is the steadier figure of the work."""

    def __init__(self):
        self.wall: dict = {}
        self.cpu: dict = {}

    def time(self, name, fn):
        """Run ``fn()`` once, keep its times; returns its result."""
        w0, c0 = time.perf_counter(), time.process_time()
        out = fn()
        w, c = time.perf_counter() - w0, time.process_time() - c0
        self.wall[name] = min(self.wall.get(name, float("inf")), w)
        self.cpu[name] = min(self.cpu.get(name, float("inf")), c)
        return out


def _rounds(idx, cases: dict, repeat: int) -> _Best:
    """Best times of one call per case over ``repeat`` rounds, the cases in a rotated order
    each round; every answer checked against the first case's."""
    names = list(cases)
    best = _Best()
    want = None
    for r in range(repeat):
        for name in names[r % len(names):] + names[:r % len(names)]:
            a, b = cases[name]
            got = best.time(name, lambda: idx.reaches(a, b))
            if want is None:
                want = got
            elif not got.equals(want):
                raise AssertionError(f"layout {name}: answers differ from the other layouts'")
    return best


def _figures(best: _Best, name: str, ref: str = "int64") -> dict:
    """One case's times and its ratios to the reference case's (wall and CPU)."""
    w, c = best.wall[name], best.cpu[name]
    return {"seconds": w, "cpu_seconds": c, "reference_seconds": best.wall[ref],
            "reference_cpu_seconds": best.cpu[ref], "ratio": w / best.wall[ref],
            "cpu_ratio": c / best.cpu[ref]}


def _fetch_seconds(con, repeat: int) -> float:
    """DuckDB's own time to hand over both INTEGER key columns as Arrow (best of repeat)."""
    seconds, _ = bl.best_of(lambda: [con.sql(f"SELECT {c} FROM layout_pairs").to_arrow_table()
                                     for c in "ab"], repeat)
    return seconds


def layout_costs(idx, keys: pa.Array, pairs: int, repeat: int, seed: int = 1) -> dict:
    """Seconds of one call per layout of ``pairs`` random pairs, and each one's ratio to the
    contiguous int64 call of the same keys."""
    t = random_pairs(keys, pairs, seed=seed)
    s = t.column("src").to_numpy().astype(np.int64)
    d = t.column("dst").to_numpy().astype(np.int64)
    con = duckdb.connect()
    cases, refused = _layouts(s, d, con), {}
    for name, (a, b) in list(cases.items()):  # untimed: kernels compiled, buffers made
        try:
            idx.reaches(a, b)
        except Exception as exc:  # a layout this version refuses: reported, not timed
            refused[name] = {"seconds": None, "note": f"refused: {type(exc).__name__}"}
            del cases[name]
    best = _rounds(idx, cases, repeat)
    fetch = _fetch_seconds(con, repeat)
    con.close()
    out = {name: _figures(best, name) for name in cases}
    out.update(refused)
    rel = out["DuckDB relation"]
    if rel["seconds"] is not None:  # DuckDB's own execution of the relations taken off
        rel["duckdb_seconds"] = fetch
        rel["ratio"] = (rel["seconds"] - fetch) / rel["reference_seconds"]
        rel["cpu_ratio"] = None
    for typ in NARROW:
        out[typ] = _narrow_cost(idx, keys, pairs, typ, repeat, seed)
    return out


def _narrow_cost(idx, keys: pa.Array, pairs: int, typ: str, repeat: int, seed: int) -> dict:
    """One call of pairs of the vertex keys that fit ``typ``, as ``typ`` against int64."""
    info = np.iinfo(typ)
    k = keys.to_numpy(zero_copy_only=False)
    fit = k[(k >= info.min) & (k <= info.max)]
    if fit.shape[0] == 0:
        return {"seconds": None, "note": f"no vertex key fits {typ}"}
    rng = np.random.default_rng(seed)
    s, d = (fit[rng.integers(0, fit.shape[0], pairs)].astype(np.int64) for _ in range(2))
    cases = {"int64": (s, d), typ: (s.astype(typ), d.astype(typ))}
    for a, b in cases.values():
        idx.reaches(a, b)
    return {**_figures(_rounds(idx, cases, repeat), typ), "keys": int(fit.shape[0])}


def per_chunk_costs(edges: pa.Table, keys: pa.Array, pairs: int, threads: int,
                    repeat: int) -> dict:
    """Times of the per-chunk statement, the identity UDF and the whole-column statement over
    ``pairs`` random pairs at DuckDB ``threads`` (0: every core), in alternating rounds; the
    per-chunk statement's ratios to the identity UDF."""
    import duckdb.sqltypes as st

    con = bl.pairs_connection({"chunks": random_pairs(keys, pairs, seed=2)},
                              threads or os.cpu_count() or 1)
    try:
        install(con)
        con.register("edge_view", edges.select(["src", "dst"]))
        con.execute("CREATE TABLE edges AS SELECT * FROM edge_view")
        con.unregister("edge_view")
        con.execute("SELECT grail_index('edges')").fetchall()
        con.create_function("layout_identity", lambda a, b: pc.equal(a, b), [st.BIGINT] * 2,
                            st.BOOLEAN, type="arrow")
        sql = "SELECT count(*) FILTER (WHERE reaches(a, b)) FROM pairs_chunks"
        floor = "SELECT count(*) FILTER (WHERE layout_identity(a, b)) FROM pairs_chunks"

        def chunked():
            with per_chunk(con):
                return con.execute(sql).fetchall()[0]

        cases = {"whole column": lambda: con.execute(sql).fetchall()[0],
                 "per chunk": chunked, "identity UDF": lambda: con.execute(floor).fetchall()[0]}
        best, rows = _Best(), {}
        for name, fn in cases.items():  # untimed: host labels made, kernels loaded
            rows[name] = fn()
        if rows["per chunk"] != rows["whole column"]:
            raise AssertionError(f"per chunk: {rows['per chunk'][0]} reachable pairs, whole "
                                 f"column {rows['whole column'][0]}")
        names = list(cases)
        for r in range(repeat):
            for name in names[r % 3:] + names[:r % 3]:
                best.time(name, cases[name])
    finally:
        con.close()
    return {"pairs": pairs, "threads": threads or os.cpu_count(),
            "per_chunk_seconds": best.wall["per chunk"],
            "identity_udf_seconds": best.wall["identity UDF"],
            "whole_column_seconds": best.wall["whole column"],
            "ratio": best.wall["per chunk"] / best.wall["identity UDF"],
            "per_chunk_cpu_seconds": best.cpu["per chunk"],
            "identity_udf_cpu_seconds": best.cpu["identity UDF"],
            "cpu_ratio": best.cpu["per chunk"] / best.cpu["identity UDF"],
            "reachable": int(rows["whole column"][0])}


def add_arguments(p: argparse.ArgumentParser) -> argparse.ArgumentParser:
    """Register the options of ``python -m benchmarks layouts`` on ``p``."""
    p.add_argument("--workloads", nargs="+", default=["citeseer"],
                   help="datasets, edge files or gen:... specs (default: citeseer)")
    p.add_argument("--pairs", nargs="+", type=int, default=[100_000, 1_000_000],
                   help="pairs per call of the layouts (default: 100000 1000000)")
    p.add_argument("--chunk-pairs", type=int, default=1_000_000,
                   help="pairs of the per-chunk statement (default: 1000000; 0: skip it)")
    p.add_argument("--threads", nargs="+", type=int, default=[1, 0],
                   help="DuckDB threads of the per-chunk statement (0: every core)")
    p.add_argument("--backend", default="cpu", help="cpu | gpu (default: cpu)")
    p.add_argument("--repeat", type=int, default=7, help="rounds; the best is kept")
    p.add_argument("--skip-layouts", action="store_true", help="only the per-chunk path")
    p.add_argument("--out", default="bench-layouts")
    return p


def run(args) -> int:
    """Measure every workload; write ``--out/layouts.json`` and print the Markdown."""
    os.environ["GRAIL_DUCKDB_BACKEND"] = args.backend
    machine = machine_info()
    machine["numba_threads"] = numba.get_num_threads()
    report = {"kind": "layouts", "backend": args.backend, "machine": machine,
              "command": "python -m benchmarks layouts " + " ".join(sys.argv[2:]),
              "repeat": args.repeat, "graphs": {}}
    for spec in args.workloads:
        w = load_workload(spec)
        idx = gd.build_index(w.edges, backend=args.backend)
        keys = idx.ids.keys
        rec = report["graphs"][w.name] = {"vertices": idx.n_vertices,
                                             "edges": idx.edge_rows}
        if not args.skip_layouts:
            for n in args.pairs:
                rec[f"layouts {n}"] = layout_costs(idx, keys, n, args.repeat)
                _say(f"{w.name} {n:,} pairs: " + ", ".join(
                    f"{k} {v['ratio']:.2f}x" for k, v in rec[f"layouts {n}"].items()
                    if v.get("ratio") is not None))
        for threads in args.threads if args.chunk_pairs else ():
            rec[f"per chunk {threads}"] = per_chunk_costs(w.edges, keys, args.chunk_pairs,
                                                          threads, args.repeat)
            _say(f"{w.name} per chunk, {threads or 'all'} threads: "
                 f"{rec[f'per chunk {threads}']['ratio']:.2f}x the identity UDF")
    return publish(report, args.out, "layouts", render)


def render(report: dict) -> str:
    """A ``layouts`` report as Markdown: the layout ratios, then the per-chunk ratios."""
    m = report["machine"]
    lines = [f"Command: `{report['command']}`", "",
             f"Date: {m.get('date')}. Machine: {m['cpu']}, {m['cores']} cores; GPU: "
             f"{m.get('gpu') or 'none'}; backend **{report['backend']}**, Numba threads "
             f"{m.get('numba_threads')}. Load average when the run began: "
             f"{m.get('load_average_at_start')}. Best of {report['repeat']} rounds (the cases "
             "in a rotated order each round); CPU: the process's CPU time, every thread (the "
             "steadier figure where others share the machine).", ""]
    for name, rec in report["graphs"].items():
        sizes = [k for k in rec if k.startswith("layouts ")]
        if sizes:
            lines += [f"### {name}: one call per key layout", "",
                      "Time of one `reaches` call (ms) and its ratio to the same keys as "
                      "contiguous int64, wall and CPU (the 8- and 16-bit types: pairs of the "
                      "vertices whose keys fit, against int64 arrays of those keys; the DuckDB "
                      "relation: its own execution taken off).", "",
                      "| layout | " + " | ".join(f"{int(k.split()[1]):,} pairs (ms) | ratio | "
                                                 "CPU ratio" for k in sizes) + " |",
                      "|---|" + "---:|---:|---:|" * len(sizes)]
            for layout in rec[sizes[0]]:
                lines.append(f"| {layout} | " + " | ".join(_layout_cells(rec[k][layout])
                                                           for k in sizes) + " |")
            lines.append("")
        chunks = [rec[k] for k in rec if k.startswith("per chunk ")]
        if chunks:
            lines += [f"### {name}: the per-chunk path", "",
                      "`count(*) FILTER (WHERE reaches(a, b))` with every call per DuckDB "
                      "chunk, against the identity arrow UDF over the same pairs (ms, wall), "
                      "and against the whole-column statement (where the pairs need deep "
                      "searches, their work, not the path, sets both).", "",
                      "| pairs | DuckDB threads | per chunk | identity UDF | ratio | CPU ratio | "
                      "whole column | per chunk / whole column |",
                      "|---:|---:|---:|---:|---:|---:|---:|---:|"]
            for c in chunks:
                lines.append(f"| {c['pairs']:,} | {c['threads']} | "
                             f"{c['per_chunk_seconds'] * 1e3:.1f} | "
                             f"{c['identity_udf_seconds'] * 1e3:.1f} | {c['ratio']:.2f}× | "
                             f"{c['cpu_ratio']:.2f}× | {c['whole_column_seconds'] * 1e3:.1f} | "
                             f"{c['per_chunk_seconds'] / c['whole_column_seconds']:.2f}× |")
            lines.append("")
    return "\n".join(lines)


def _layout_cells(f: dict) -> str:
    """The three cells of one layout at one size."""
    if f.get("seconds") is None:
        return f"– | {f.get('note', '–')} | –"
    ms = f"{f['seconds'] * 1e3:.3f}"
    if "duckdb_seconds" in f:
        ms += f" ({f['duckdb_seconds'] * 1e3:.3f} DuckDB's)"
    cpu = "–" if f.get("cpu_ratio") is None else f"{f['cpu_ratio']:.2f}×"
    return f"{ms} | {f['ratio']:.2f}× | {cpu}"
