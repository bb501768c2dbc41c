"""BFL (Su et al., "Reachability querying: can it be even faster?", TKDE 2017), the one-core
index to beat, run as its authors' program beside the engine, on the same DAG and pairs.

The bench is given the program (``--bfl PATH``: built from BoleynSu/bfl with
``g++ -O3 -std=c++11 main.cpp``; it is never part of this repository). BFL reads a DAG in
the ``.gra`` format and a file of ``u v -1`` queries, and prints its index time, its query
time and how many queries were reachable. It is given the engine's condensed DAG (the same
graph for the DAGs of the bench; a graph with cycles is condensed first, which BFL needs),
and the query sets mapped to components; its count of reachable pairs must equal the
engine's.
"""
from __future__ import annotations

import re
import subprocess
import tempfile
from pathlib import Path

import numpy as np

from grail_duckdb.kernels import to_host

__all__ = ["run_bfl", "write_gra", "write_queries"]

_FIGURE = {"index": re.compile(r"index time:\s*([\d.]+)s"),
           "query": re.compile(r"query time:\s*([\d.]+)ms"),
           "reachable": re.compile(r"reachable:\s*(\d+)")}


def write_gra(path: Path, indptr: np.ndarray, indices: np.ndarray) -> None:
    """The DAG of ``indptr``/``indices`` (CSR) as a ``.gra`` file.

    >>> import io, os
    >>> p = Path(tempfile.mkdtemp()) / "g.gra"
    >>> write_gra(p, np.array([0, 2, 2, 3]), np.array([1, 2, 1]))
    >>> p.read_text()
    'graph_for_greach\\n3\\n0: 1 2 #\\n1: #\\n2: 1 #\\n'
    """
    n = indptr.shape[0] - 1
    with open(path, "w") as out:
        out.write(f"graph_for_greach\n{n}\n")
        text = indices.astype(str)
        for u in range(n):
            row = text[indptr[u]:indptr[u + 1]]
            out.write(f"{u}: {' '.join(row)} #\n" if row.shape[0] else f"{u}: #\n")


def write_queries(path: Path, u: np.ndarray, v: np.ndarray) -> None:
    """Query pairs as BFL reads them: ``u v -1`` per line (the answer unknown)."""
    np.savetxt(path, np.column_stack([u, v, np.full(u.shape[0], -1)]), fmt="%d")


def _figures(text: str) -> dict:
    got = {k: rx.search(text) for k, rx in _FIGURE.items()}
    if not all(got.values()):
        raise RuntimeError(f"BFL printed no {[k for k, m in got.items() if not m]}: {text[-500:]}")
    return {"index_seconds": float(got["index"].group(1)),
            "query_seconds": float(got["query"].group(1)) / 1e3,
            "reachable": int(got["reachable"].group(1))}


def run_bfl(binary: str, idx, sets: dict, expected: dict, *, repeat: int = 3,
            timeout: float = 600.0) -> dict:
    """BFL's build and each query set on ``idx``'s condensed DAG, best of ``repeat`` runs:
    ``{"build_seconds", "<set>_seconds", "agree"}`` (``agree``: its reachable count equals
    the engine's on every set)."""
    dag_ptr, dag_idx = to_host(idx.dag.indptr), to_host(idx.dag.indices)
    comp = to_host(idx.comp)
    out: dict = {"build_seconds": None, "agree": True, "command": f"{binary} graph queries"}
    with tempfile.TemporaryDirectory() as tmp:
        gra = Path(tmp) / "dag.gra"
        write_gra(gra, dag_ptr, dag_idx)
        for name, pairs in sets.items():
            u = comp[to_host(idx.ids.encode(pairs.column("src").combine_chunks()))]
            v = comp[to_host(idx.ids.encode(pairs.column("dst").combine_chunks()))]
            queries = Path(tmp) / f"{name}.txt"
            write_queries(queries, u, v)
            runs = []
            for _ in range(repeat):
                done = subprocess.run([binary, str(gra), str(queries)], capture_output=True,
                                      text=True, timeout=timeout)
                if done.returncode != 0:
                    raise RuntimeError(f"BFL failed ({done.returncode}): {done.stderr[-500:]}")
                runs.append(_figures(done.stdout))
            best = {k: min(r[k] for r in runs) for k in ("index_seconds", "query_seconds")}
            out["build_seconds"] = min(out["build_seconds"] or np.inf, best["index_seconds"])
            out[f"{name}_seconds"] = best["query_seconds"]
            out[f"{name}_reachable"] = runs[0]["reachable"]
            out["agree"] &= runs[0]["reachable"] == int(np.count_nonzero(expected[name]))
    return out
