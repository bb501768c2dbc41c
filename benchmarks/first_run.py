"""The first run on a machine: how long a fresh install makes its user wait.

``python -m benchmarks first-run [--repeat 2] [--root DIR] [--out DIR]`` runs each measurement
in a fresh Python process whose Numba cache (``NUMBA_CACHE_DIR``) is empty (**cold**: a fresh
install) or holds what the same measurement's cold run compiled (**cached**: every later run):

* **demo**: ``python -m grail_duckdb demo``, the README's first command, cold and cached;
* **small build + reaches**: ``import grail_duckdb``, ``build_index`` of a generated citation
  graph of 5,000 papers (about 22,000 citations) and one ``reaches`` call of 10,000 random
  pairs, cold;
* **warm_up**: ``grail_duckdb.warm_up()``, cold (its compile spread over two processes, and in
  one) and cached.

Each figure is the wall time of the whole process (Python's start and the imports included),
with the CPU seconds of the process and of the processes it waited for, and the load average
when it started: a cold compile is CPU work, slowed in proportion where others share the
machine. ``--root``: a checkout whose package is measured instead of this one (the figures
before a change, in the same run). The report (``first_run.json``, ``"kind": "first_run"``)
goes to ``--out``; copy it to ``benchmarks/results/`` under a name that says the machine, and
``python -m benchmarks docs`` renders it with :func:`render`.
"""
from __future__ import annotations

import argparse
import json
import os
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from .bench import machine_info
from .report import publish

__all__ = ["add_arguments", "measure", "render", "run", "TARGETS"]

ROOT = Path(__file__).resolve().parent.parent
#: the issue's targets on a 2-core machine, cold (seconds)
TARGETS = {"demo (cold)": 30.0, "small build + reaches (cold)": 5.0}

#: the small graph's script: prints its own phases as JSON
_SMALL = """
import json, sys, time
t0 = time.perf_counter()
import numpy as np
import grail_duckdb as gd
from grail_duckdb.tools.generators import citation_dag
t1 = time.perf_counter()
edges = citation_dag(5000, seed=0)
t2 = time.perf_counter()
idx = gd.build_index(edges)
t3 = time.perf_counter()
keys = idx.ids.keys
rng = np.random.default_rng(1)
pick = rng.integers(0, len(keys), (2, 10_000))
answers = idx.reaches(keys.take(pick[0]), keys.take(pick[1]))
t4 = time.perf_counter()
print(json.dumps({"import_s": t1 - t0, "build_s": t3 - t2, "reaches_s": t4 - t3,
                  "edges": edges.num_rows, "reachable": answers.true_count}))
"""
_WARM_UP = """
import sys, grail_duckdb as gd
workers = int(sys.argv[1]) or None
try:
    gd.warm_up(workers=workers)
except TypeError:         # a checkout whose warm_up compiles in one process only
    gd.warm_up()
"""


def _say(msg: str) -> None:
    print(msg, file=sys.stderr, flush=True)


def _child_seconds() -> float:
    r = resource.getrusage(resource.RUSAGE_CHILDREN)
    return r.ru_utime + r.ru_stime


def _timed(argv: list[str], cache: Path, root: Path) -> dict:
    """Run ``argv`` (after ``python``) in a fresh process on the Numba cache ``cache``: its
    wall and CPU seconds, the load average when it started, its last lines of stdout."""
    env = {k: v for k, v in os.environ.items() if k not in ("GRAIL_DUCKDB_JIT",
                                                           "GRAIL_DUCKDB_PROGRESS")}
    env.update(NUMBA_CACHE_DIR=str(cache), GRAIL_DUCKDB_BACKEND="cpu",
               PYTHONPATH=os.pathsep.join(p for p in (str(root), env.get("PYTHONPATH")) if p))
    load = os.getloadavg()[0]
    cpu0, t0 = _child_seconds(), time.perf_counter()
    done = subprocess.run([sys.executable, *argv], cwd=root, env=env, capture_output=True,
                          text=True, stdin=subprocess.DEVNULL)
    wall, cpu = time.perf_counter() - t0, _child_seconds() - cpu0
    if done.returncode != 0:
        raise RuntimeError(f"{' '.join(argv)} failed: {done.stderr[-2000:]}")
    return {"wall_s": round(wall, 2), "cpu_s": round(cpu, 2), "load": round(load, 2),
            "stdout": done.stdout.strip().splitlines()[-1:]}


def measure(root: Path = ROOT, workdir: Path | None = None) -> dict:
    """One round of every measurement: ``{name: figures}`` (see the module's notes)."""
    out: dict = {}
    with tempfile.TemporaryDirectory(dir=workdir) as tmp:
        caches = {name: Path(tmp) / name for name in ("demo", "small", "warm", "warm1")}
        for cache in caches.values():
            cache.mkdir()
        plan = [("demo (cold)", ["-m", "grail_duckdb", "demo"], "demo"),
                ("demo (cached)", ["-m", "grail_duckdb", "demo"], "demo"),
                ("small build + reaches (cold)", ["-c", _SMALL], "small"),
                ("warm_up (cold, 2 processes)", ["-c", _WARM_UP, "2"], "warm"),
                ("warm_up (cached)", ["-c", _WARM_UP, "2"], "warm"),
                ("warm_up (cold, 1 process)", ["-c", _WARM_UP, "1"], "warm1")]
        for name, argv, cache in plan:
            out[name] = rec = _timed(argv, caches[cache], root)
            if name.startswith("small"):
                rec.update(json.loads(rec.pop("stdout")[0]))
            _say(f"{name}: {rec['wall_s']:.1f} s wall, {rec['cpu_s']:.1f} s CPU, load "
                 f"{rec['load']:.1f}")
    return out


def add_arguments(p: argparse.ArgumentParser) -> argparse.ArgumentParser:
    """Register the options of ``python -m benchmarks first-run`` on ``p``."""
    p.add_argument("--repeat", type=int, default=2, help="rounds (default 2); the least kept")
    p.add_argument("--root", default=str(ROOT),
                   help="the checkout whose package is measured (default: this one)")
    p.add_argument("--out", default="bench-first-run")
    return p


def run(args) -> int:
    """Measure ``--repeat`` rounds; write ``--out/first_run.json`` and print the Markdown."""
    root = Path(args.root).resolve()
    rounds = [measure(root) for _ in range(max(args.repeat, 1))]
    figures = {name: {key: [r[name].get(key) for r in rounds]
                      for key in rounds[0][name] if key != "stdout"}
               for name in rounds[0]}
    commit = subprocess.run(["git", "-C", str(root), "rev-parse", "--short", "HEAD"],
                            capture_output=True, text=True).stdout.strip() or None
    report = {"kind": "first_run", "machine": machine_info(), "commit": commit,
              "command": "python -m benchmarks first-run " + " ".join(sys.argv[2:]),
              "repeat": len(rounds), "figures": figures, "targets": TARGETS}
    return publish(report, args.out, "first_run", render)


def render(report: dict) -> str:
    """A ``first_run`` report as Markdown: each measurement's least wall time of the rounds,
    every round's wall and CPU seconds and load average, and the target where there is one."""
    m = report["machine"]
    lines = [f"Command: `{report['command']}` (commit {report.get('commit')})", "",
             f"Date: {m.get('date')}. Machine: {m['cpu']}, {m['cores']} cores, shared: the load "
             "average beside each run is the machine's when it began (a cold compile is CPU "
             "work; where other work takes a core, it takes longer in proportion). Each run is "
             "a fresh process, timed from its start; cold: an empty Numba cache, as after an "
             "install; cached: the cache its cold run filled.", "",
             "| first run | least wall (s) | target (s) | each round: wall / CPU s (load) |",
             "|---|---:|---:|---|"]
    for name, f in report["figures"].items():
        rounds = "; ".join(f"{w:.1f} / {c:.1f} ({load:.1f})"
                           for w, c, load in zip(f["wall_s"], f["cpu_s"], f["load"]))
        target = report["targets"].get(name)
        lines.append(f"| {name} | {min(f['wall_s']):.1f} | "
                     f"{'–' if target is None else f'{target:g}'} | {rounds} |")
    small = report["figures"].get("small build + reaches (cold)")
    if small:
        lines += ["", f"The small graph: {small['edges'][0]:,} citations; in its least round "
                  f"the import took {min(small['import_s']):.2f} s, the build "
                  f"{min(small['build_s']):.2f} s, the call of 10,000 pairs "
                  f"{min(small['reaches_s']):.2f} s."]
    return "\n".join(lines) + "\n"
