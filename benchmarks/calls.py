"""Query figures at scale, for the bench: the time of 1M and 10M uniform random pairs per call,
and the fixed cost of a call whose pairs all settle in the cuts.

* **at scale**: one call of N random pairs (the keys drawn as for the 100K set, another seed).
  A call that would take longer than the budget runs on a prefix of the pairs and is scaled up
  (marked ``sampled``), as the baselines are; the answers are exact either way.
* **fixed cost**: 100K pairs that no search touches: the reachable set reversed (v, u) for
  every reachable (u, v). On a DAG each such pair is settled by the level cut (or, inside a
  strongly connected component, is one component): the call costs the key lookup, one pass of
  the cuts and the transfers, nothing else. Best of many calls (it is short and noisy).
"""
from __future__ import annotations

import pyarrow as pa

from . import workloads
from .baselines import Measured, best_of

#: pairs per call of the scale figures
SCALE_SIZES = (1_000_000, 10_000_000)
#: calls of the fixed-cost figure (the best is kept)
FIXED_REPEAT = 25


def _timed(idx, src: pa.Array, dst: pa.Array):
    """One engine call on the index's backend, synchronised: ``(answers, stats)``."""
    result = idx.reaches_with_stats(src, dst)
    idx.kernels.synchronize()
    return result


def fixed_cost(idx, reachable: pa.Table) -> dict:
    """Best time of FIXED_REPEAT calls of the reversed reachable pairs, with their statistics."""
    src, dst = reachable.column("dst"), reachable.column("src")
    seconds, (_, stats) = best_of(lambda: _timed(idx, src, dst), repeat=FIXED_REPEAT, short=0.2)
    st = stats.as_dict()
    m = Measured(seconds=seconds, total=len(reachable), run_pairs=len(reachable), sampled=False)
    out = m.as_dict()
    out["stats"] = st
    out["all_settled_by_cuts"] = st["searched"] == 0
    return out


def at_scale(idx, keys: pa.Array, size: int, seed: int, budget: float, per_pair: float) -> dict:
    """One call of ``size`` random pairs (or a prefix that fits ``budget`` seconds, scaled),
    given the time per pair of the 100K random set (``per_pair``) to size the prefix."""
    pairs = workloads.random_pairs(keys, size, seed=seed + 1)
    run = size
    if per_pair * size > budget:
        run = max(1000, min(size, int(budget / max(per_pair, 1e-12))))
        pairs = pairs.slice(0, run)
    src, dst = pairs.column("src"), pairs.column("dst")
    seconds, (_, stats) = best_of(lambda: _timed(idx, src, dst))
    m = Measured(seconds=seconds * size / run, total=size, run_pairs=run, sampled=run < size)
    out = m.as_dict()
    out["stats"] = stats.as_dict()
    return out


def bench_scale(idx, keys: pa.Array, reachable: pa.Table, random_seconds: float,
                random_pairs: int, s: dict, say) -> dict:
    """The scale figures of one index: {'fixed cost 100K': ..., 'random 1M': ..., ...}."""
    out = {"fixed": fixed_cost(idx, reachable)}
    f = out["fixed"]
    say(f"  {idx.backend} fixed cost: {f['seconds'] * 1e3:.3f} ms for {f['total_pairs']:,} "
        f"pairs settled by the cuts ({'all' if f['all_settled_by_cuts'] else 'not all'})")
    per_pair = random_seconds / max(random_pairs, 1)
    for size in s.get("scale", SCALE_SIZES):
        m = at_scale(idx, keys, int(size), s["seed"], s["budget"], per_pair)
        out[f"random {int(size):,}"] = m
        scaled = f" (scaled from {m['run_pairs']:,})" if m["sampled"] else ""
        say(f"  {idx.backend} random {int(size):,}: {m['seconds'] * 1e3:,.1f} ms{scaled}")
    return out
