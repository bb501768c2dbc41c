"""The bench's report: the Markdown tables of docs/benchmarks.md, the README's headline
rows, and a plot.

:func:`to_markdown` turns the dict that :func:`benchmarks.bench.run_bench` returns into
the tables (build phases, queries against the baselines, cut statistics, traversal GTEPS, the
figures to beat); :func:`plot` draws the query figures (matplotlib, optional).
"""
from __future__ import annotations

import json
from pathlib import Path

import numpy as np

QUERY_SETS = ("random", "reachable")

#: the design's "figures to beat" (original authors' code, 2-core machine, one thread, 100K
#: queries): build / reachable ("positive") / random, in milliseconds
FIGURES_TO_BEAT = {
    "citeseer": {"GRAIL C++ (d=2)": (406, 104, 10.1), "BFL": (58, 11.7, 0.61),
                 "O'Reach": (272, 3.4, 1.6)},
    "uniprot": {"GRAIL C++ (d=2)": (474, 95, 6.5), "BFL": (45, 6.0, 0.58),
                "O'Reach": (713, 2.4, 1.6)},
}


# ----------------------------------------------------------------------------------------------
def publish(report: dict, out, name: str, render) -> int:
    """The end of a bench command: ``report`` written as ``out/name.json`` (the folder made
    where it is missing; ``python -m benchmarks docs`` renders the copies kept in
    ``benchmarks/results/``) and printed as ``render`` makes it. The command's exit status."""
    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    (out / f"{name}.json").write_text(json.dumps(report, indent=1))
    print(render(report))
    return 0


def method_rows(workload: dict) -> list[dict]:
    """Every measured method of a workload, one row each: name, kind, figures per query set.

    kind: 'engine' (grail_duckdb, Python or SQL), 'baseline' (another way to answer), 'floor'
    (the identity UDF: what any Python UDF costs).
    """
    rows = []
    for b, per in workload["backends"].items():
        for method, figures in per["queries"].items():
            kind = "baseline" if method.startswith("plain") else "engine"
            rows.append({"method": f"{method} [{b}]", "kind": kind, "figures": figures})
    for method, figures in workload.get("baselines", {}).items():
        kind = "floor" if "floor" in method else "baseline"
        rows.append({"method": method, "kind": kind, "figures": figures})
    return rows


def best_baseline(rows: list[dict], qset: str) -> float | None:
    """Seconds of the fastest baseline on a query set (None when there is none)."""
    times = [r["figures"][qset]["seconds"] for r in rows
             if r["kind"] == "baseline" and r["figures"].get(qset, {}).get("seconds")]
    return min(times) if times else None


def _ms(seconds) -> str:
    if seconds is None:
        return "–"
    ms = seconds * 1e3
    return f"{ms:,.0f}" if ms >= 100 else f"{ms:,.1f}" if ms >= 1 else f"{ms:.3f}"


def _rate(x) -> str:
    if not x:
        return "–"
    for unit, scale in (("G", 1e9), ("M", 1e6), ("K", 1e3)):
        if x >= scale:
            return f"{x / scale:.3g}{unit}"
    return f"{x:.3g}"


def _cell(fig: dict | None, best: float | None) -> list[str]:
    """Three cells of a query set: time (ms, '~' when scaled from a sample), pairs/s, ratio."""
    if not fig or fig.get("seconds") is None:
        return ["–", "–", (fig or {}).get("note", "")[:60] or "–"]
    mark = "~" if fig.get("sampled") else ""
    bad = "" if fig.get("agree") in (True, None) else " ✗"
    ratio = f"{best / fig['seconds']:.3g}×" if best else "–"
    return [f"{mark}{_ms(fig['seconds'])}{bad}", _rate(fig["pairs_per_second"]), ratio]


def _labels(report: dict) -> str:
    """The label pairs d of the run: as asked, else each backend's as its builds reported."""
    if report["settings"].get("labels") is not None:
        return str(report["settings"]["labels"])
    ds = {b: per["build"]["summary"]["labels"] for w in report["workloads"]
          for b, per in w["backends"].items()}
    return ", ".join(f"{d} [{b}]" for b, d in sorted(ds.items())) or "the backend's default"


def to_markdown(report: dict) -> str:
    """The whole report as Markdown: machine, build table, query tables, GTEPS, references."""
    s, m = report["settings"], report["machine"]
    lines = [
        "## Bench results", "",
        f"Command: `{report['command']}`", "",
        f"Date: {m.get('date', 'not recorded')}. "
        f"Machine: {m['cpu']}, {m['cores']} cores, {m.get('memory_gib')} GiB; GPU: "
        f"{m['gpu'] or 'none'}. Python {m['python']}, DuckDB {m['duckdb']}, Numba "
        f"{m['numba']}. Threads: the CPU backend's builds and query calls use all "
        f"{m['cores']} cores; DuckDB `threads={s['threads']}`. Load average "
        f"when the run began: {m.get('load_average_at_start')}.", "",
        f"d = {_labels(report)} label pairs, seed {s['seed']}, {s['queries']:,} pairs per query "
        "set. Times in ms; `~` = measured on a prefix of the pairs that fits "
        f"{s['budget']:g} s and scaled to the whole set; ✗ = answers differ from the engine's; "
        "ratio = best baseline's time / this row's time (above 1: faster than every baseline).",
        "",
    ]
    lines += _build_table(report) + _indices_table(report)
    for w in report["workloads"]:
        lines += _query_table(w, s) + _stats_table(w)
    lines += _scale_table(report) + _gteps_table(report) + _reference_table(report)
    return "\n".join(lines) + "\n"


def _build_table(report: dict) -> list[str]:
    """Rows = build phases and sizes, columns = workload on backend."""
    cols = [(w, b) for w in report["workloads"] for b in w["backends"]]
    if not cols:
        return []
    phases: list[str] = []
    for w, b in cols:
        for p in w["backends"][b]["build"]["phases_seconds"]:
            if p not in phases:
                phases.append(p)
    head = "| build (ms) | " + " | ".join(f"{w['name']} [{b}]" for w, b in cols) + " |"
    out = ["### Index build", "", head, "|---|" + "---:|" * len(cols)]

    def row(label, fn):
        out.append(f"| {label} | " + " | ".join(fn(w["backends"][b]["build"], w)
                                                for w, b in cols) + " |")

    row("vertices / edges", lambda bd, w: f"{w.get('vertices', 0):,} / {w['edge_rows']:,}")
    row("components / DAG edges", lambda bd, w: f"{bd['summary']['components']:,} / "
                                                f"{bd['summary']['dag_edges']:,}")
    for p in phases:
        row(p, lambda bd, w, p=p: _ms(bd["phases_seconds"].get(p)))
    row("**total build**", lambda bd, w: f"**{_ms(bd['total_seconds'])}**")
    row("save (persistence)", lambda bd, w: _ms(bd["persistence"].get("save_seconds")))
    row("build that saves as it goes: build / save after the labels",
        lambda bd, w: f'{_ms(bd["persistence"].get("etl_build_seconds"))} / '
                      f'{_ms(bd["persistence"].get("etl_save_seconds"))}')
    row("load", lambda bd, w: _ms(bd["persistence"].get("load_seconds")))
    row("SQL `grail_index()` (read table, build; in-memory DB)",
        lambda bd, w: _ms(bd.get("sql_grail_index_seconds")))
    row("index file (MiB)", lambda bd, w: _mib(bd["persistence"].get("size_bytes")))
    row("peak host RSS growth (MiB)", lambda bd, w: _mib(bd["memory"]["rss_growth_bytes"]))
    row("peak GPU pool (MiB)", lambda bd, w: _mib(bd["memory"]["gpu_pool_peak_bytes"]))
    out += ["", "Peak host RSS growth: resident set size sampled every 2 ms during the build, "
            "minus the size when it began. Peak GPU pool: CuPy's default memory pool, emptied "
            "before the build.", ""]
    return out


#: the targets the ratios of :func:`_indices_table` are held to (the engine's time / the
#: one-core index's), by the machine's cores
INDEX_TARGETS = {"build": {2: 1.0, 16: 0.25}, "queries": 0.5}


def _targets_text() -> str:
    """:data:`INDEX_TARGETS` in words."""
    build = " and ".join(f"{r:g}× on {c} cores" for c, r in INDEX_TARGETS["build"].items())
    return (f"Targets: a CPU build at most {build}; queries at most "
            f"{INDEX_TARGETS['queries']:g}× (twice as fast) on every mix.")


def _indices_table(report: dict) -> list[str]:
    """The one-core indices measured in the same run (BFL), beside the engine on each
    backend: build and query times, and the engine's time as a multiple of theirs (below 1:
    faster)."""
    rows = [(w, name, fig) for w in report["workloads"]
            for name, fig in w.get("indices", {}).items()]
    if not rows:
        return []
    out = ["### Against the one-core index to beat, same run", "",
           "Its authors' program on one core, on the engine's condensed DAG and the same "
           "pairs (its count of reachable pairs checked against the engine's). Ratio: the "
           "engine's time / the index's. " + _targets_text(), "",
           "| workload | index | build (ms) | random (ms) | reachable (ms) | "
           "engine [backend]: build ratio | random ratio | reachable ratio |",
           "|---|---|---:|---:|---:|---|---|---|"]
    for w, name, fig in rows:
        ours = []
        for b, per in w["backends"].items():
            q = per["queries"]["grail_duckdb"]
            ours.append((b, per["build"]["total_seconds"] / fig["build_seconds"],
                         q["random"]["seconds"] / fig["random_seconds"],
                         q["reachable"]["seconds"] / fig["reachable_seconds"]))
        cells = [" / ".join(f"{r:.2f}× [{b}]" for b, *rs in ours for r in rs[i:i + 1])
                 for i in range(3)]
        agree = "" if fig.get("agree", True) else " ✗"
        out.append(f"| {w['name']} | {name}{agree} | {_ms(fig['build_seconds'])} | "
                   f"{_ms(fig['random_seconds'])} | {_ms(fig['reachable_seconds'])} | "
                   + " | ".join(cells) + " |")
    return out + [""]


def _mib(x) -> str:
    return "–" if x is None else f"{x / 2**20:,.1f}"


def _query_table(w: dict, s: dict) -> list[str]:
    """One row per method; time, pairs/s and ratio to the best baseline for each query set."""
    rows = method_rows(w)
    best = {q: best_baseline(rows, q) for q in QUERY_SETS}
    n = f"{s['queries'] // 1000}K" if s["queries"] % 1000 == 0 else f"{s['queries']:,}"
    out = [f"### Queries: {w['name']}", "",
           f"| method | kind | random {n} (ms) | pairs/s | ratio | reachable {n} (ms) | "
           "pairs/s | ratio |", "|---|---|---:|---:|---:|---:|---:|---:|"]
    for r in rows:
        cells = [c for q in QUERY_SETS for c in _cell(r["figures"].get(q), best[q])]
        out.append(f"| {r['method']} | {r['kind']} | " + " | ".join(cells) + " |")
    notes = [per.get("sql_note") for per in w["backends"].values() if per.get("sql_note")]
    setup = {k: v.get("setup_seconds") for k, v in w.get("baselines", {}).items()
             if isinstance(v, dict) and v.get("setup_seconds") is not None}
    if setup:
        notes.append("baseline set-up, not in the times above: " + ", ".join(
            f"{k} {_ms(v)} ms" for k, v in setup.items()))
    return out + [""] + [f"*{x}*" for x in notes] + ([""] if notes else [])


def _stats_table(w: dict) -> list[str]:
    """Which cut settled each query of the engine's runs (the columns are QueryStats' fields,
    so a new cut shows up without a change here)."""
    figs = [(q, b, fig["stats"]) for b, per in w["backends"].items()
            for q, fig in per["queries"].get("grail_duckdb", {}).items()]
    if not figs:
        return []
    keys = [k for k in figs[0][2] if k not in ("queries", "null")]
    out = ["| cuts [backend] | " + " | ".join(k.replace("_", " ") for k in keys) + " |",
           "|---|" + "---:|" * len(keys)]
    for q, b, st in figs:
        out.append(f"| {q} [{b}] | " + " | ".join(f"{st.get(k, 0):,}" for k in keys) + " |")
    return out + [""]


def _scale_table(report: dict) -> list[str]:
    """Per workload and backend: the fixed cost of a call settled by the cuts, the 100K random
    call, the calls of the scale sizes, and the growth from the first size to the last."""
    rows = [(w, b, per) for w in report["workloads"] for b, per in w["backends"].items()
            if per.get("scale")]
    if not rows:
        return []
    sizes = [k for k in rows[0][2]["scale"] if k != "fixed"]
    scratch = any(per.get("query_memory") for *_, per in rows)
    out = ["### Queries at scale", "",
           "Fixed cost: one call of 100K pairs that the cuts settle (each reachable pair "
           "reversed), best of 25 calls. Random: one call of N uniform random pairs (`~`: run on "
           "a prefix that fits the budget and scaled). Growth: time of the largest call over the "
           "smallest, over their size ratio (1 = linear)."
           + (" Query scratch: the most device memory the query calls of the table held beyond "
              "the index (CuPy's pool; the reverse DAG that the first exact search makes and keeps "
              "counted apart), against the index's footprint." if scratch else ""), "",
           "| workload [backend] | fixed cost 100K (ms) | random 100K (ms) | "
           + " | ".join(f"{k} (ms)" for k in sizes) + " | growth |"
           + (" query scratch |" if scratch else ""),
           "|---|" + "---:|" * (3 + len(sizes) + scratch)]
    for w, b, per in rows:
        sc = per["scale"]
        cells = [_ms(sc["fixed"]["seconds"]) + ("" if sc["fixed"]["all_settled_by_cuts"]
                                                else " (searched)"),
                 _ms(per["queries"]["grail_duckdb"]["random"]["seconds"])]
        for k in sizes:
            cells.append(("~" if sc[k]["sampled"] else "") + _ms(sc[k]["seconds"]))
        growth = "–"
        if len(sizes) >= 2:
            a, z = sc[sizes[0]], sc[sizes[-1]]
            growth = f"{(z['seconds'] / a['seconds']) / (z['total_pairs'] / a['total_pairs']):.2f}"
        if scratch:
            q = per.get("query_memory")
            growth += (" | –" if not q else
                       f" | {q['scratch_bytes'] / 2**20:.1f} MiB = {q['scratch_fraction']:.1%} of "
                       f"{q['footprint_bytes'] / 2**20:.0f} MiB")
        out.append(f"| {w['name']} [{b}] | " + " | ".join(cells) + f" | {growth} |")
    return out + [""]


def _gteps_table(report: dict) -> list[str]:
    out = ["### Traversal primitive", "",
           "Single-source traversals from random roots with at least one out-edge, with the "
           "kernels' `reach_within_colour` (the primitive of the SCC sweeps; a worklist on the "
           "CPU), on the input graph and on the condensed DAG that the query search walks; "
           "edges traversed = out-edges of every reached vertex; GTEPS = all edges / all time "
           "(each traversal also allocates and clears its visited array, which dominates on "
           "shallow graphs). The last row per workload seeds one traversal from every vertex: "
           "each edge crossed once, the kernel's raw edge throughput.", "",
           "| workload [backend] | graph | roots | edges traversed | median per root | "
           "time (ms) | GTEPS |", "|---|---|---:|---:|---:|---:|---:|"]
    for w in report["workloads"]:
        for b, per in w["backends"].items():
            for graph, g in per["gteps"].items():
                gteps = "–" if g["gteps"] is None else f"{g['gteps']:.3g}"
                med = g.get("edges_per_root_median")
                out.append(f"| {w['name']} [{b}] | {graph} | {g['roots']:,} | {g['edges']:,} | "
                           f"{'–' if med is None else f'{med:,.0f}'} | {_ms(g['seconds'])} | "
                           f"{gteps} |")
    return out + [""]


def _reference_table(report: dict) -> list[str]:
    """Our build / reachable / random times beside the design's figures to beat."""
    out = []
    for w in report["workloads"]:
        ref = next((v for k, v in FIGURES_TO_BEAT.items() if k in w["name"].lower()), None)
        if not ref:
            continue
        if not out:
            out = ["### Against the figures to beat", "",
                   "| workload | index | build (ms) | reachable (ms) | random (ms) |",
                   "|---|---|---:|---:|---:|"]
        for b, per in w["backends"].items():
            q = per["queries"]["grail_duckdb"]
            out.append(f"| {w['name']} | grail_duckdb [{b}], d={per['build']['summary']['labels']} "
                       f"| {_ms(per['build']['total_seconds'])} | "
                       f"{_ms(q['reachable']['seconds'])} | {_ms(q['random']['seconds'])} |")
        for name, (bt, pos, rnd) in ref.items():
            out.append(f"| {w['name']} | {name} (design) | {bt:g} | {pos:g} | {rnd:g} |")
    return out + ([""] if out else [])


def headline_rows(report: dict) -> list[str]:
    """The README's rows of one run: the engine on each backend, and every one-core index
    measured beside it on the same machine (build / reachable / random, ms)."""
    m = report["machine"]
    cpu = f"{m['cores']}-core CPU"
    out = []
    for w in report["workloads"]:
        for b, per in w["backends"].items():
            q = per["queries"]["grail_duckdb"]
            where = m["gpu"] if b == "gpu" else cpu
            out.append(f"| {w['name']} | grail_duckdb, {b} [{where}] | "
                       f"{_ms(per['build']['total_seconds'])} | "
                       f"{_ms(q['reachable']['seconds'])} | {_ms(q['random']['seconds'])} |")
        for name, fig in w.get("indices", {}).items():
            out.append(f"| {w['name']} | {name}, one core [{cpu}] | {_ms(fig.get('build_seconds'))}"
                       f" | {_ms(fig.get('reachable_seconds'))} | {_ms(fig.get('random_seconds'))} |")
    return out


def plot(report: dict, path: Path) -> None:
    """Throughput per method (pairs per second, log scale), one panel per workload."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    ws = report["workloads"]
    fig, axes = plt.subplots(len(ws), 1, figsize=(9, 1.2 + 0.55 * max(
        (len(method_rows(w)) for w in ws), default=1) * max(len(ws), 1)), squeeze=False)
    for ax, w in zip(axes[:, 0], ws):
        rows = method_rows(w)
        y = np.arange(len(rows))
        for j, (q, colour) in enumerate(zip(QUERY_SETS, ("tab:blue", "tab:orange"))):
            vals = [(r["figures"].get(q) or {}).get("pairs_per_second") or 0 for r in rows]
            hatch = ["//" if (r["figures"].get(q) or {}).get("sampled") else "" for r in rows]
            bars = ax.barh(y + (j - 0.5) * 0.4, vals, height=0.4, color=colour,
                           label=f"{q} pairs")
            for bar, h in zip(bars, hatch):
                bar.set_hatch(h)
        ax.set_yticks(y, [r["method"] for r in rows], fontsize=7)
        ax.set_xscale("log")
        ax.invert_yaxis()
        ax.set_title(f"{w['name']} ({w.get('vertices', 0):,} vertices, "
                     f"{w['edge_rows']:,} edges)", fontsize=9)
        ax.set_xlabel("pairs per second (log; hatched = scaled from a sample)", fontsize=8)
    handles, labels = axes[0, 0].get_legend_handles_labels()
    fig.legend(handles, labels, fontsize=8, loc="upper right", ncol=2)
    fig.tight_layout(rect=(0, 0, 1, 0.97))
    fig.savefig(path, dpi=110)
    plt.close(fig)
