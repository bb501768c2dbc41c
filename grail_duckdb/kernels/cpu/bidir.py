"""CPU twin of ``kernels/bidir.cu``: the exact search of the pairs that the cuts and the bounded
search left, one pair at a time from both ends.

For a pair s -> t, a breadth-first search forward from s (children that may still reach t) and
one backward from t (parents that s may still reach) grow in turn, always the side whose
frontier has fewer edges, until a vertex is reached from both sides (s reaches t), a vertex of
either side meets the positive cuts, or one side runs dry (s does not reach t). On the deep
citation DAG this crosses about a sixth of the edges of a one-sided search (measured on 3,000
pairs: 1,580 against 9,985 edges per pair on average).

The scratch (a mark per vertex and four frontier arrays) belongs to the calling thread and is
handed back zeroed, so one set serves every pair of a thread.
"""
from __future__ import annotations

from numba import njit

from .search import _hub_reaches, _may_reach, _tree_reaches

_JIT = dict(cache=True, nogil=True, boundscheck=False)

#: marks: forward side (reached from s), backward side (reaches t)
_FWD, _BWD = 1, 2


@njit(**_JIT)
def _bidir_one(s, t, ptr, idx, rptr, ridx, level, inner, outer, tree_lo, tree_post, down, up,
               prune, mark, fa, fb, ba, bb, touched):
    """Does s reach t (s != t, components)? Leaves ``mark`` zeroed."""
    mark[s] = _FWD
    mark[t] = _BWD
    touched[0] = s
    touched[1] = t
    nt = 2
    nf = 1
    nb = 1
    fa[0] = s
    ba[0] = t
    ef = ptr[s + 1] - ptr[s]
    eb = rptr[t + 1] - rptr[t]
    found = False
    while nf > 0 and nb > 0 and not found:
        nn = 0
        if ef <= eb:  # forward: children of the frontier that t may still be below
            en = 0
            for i in range(nf):
                v = fa[i]
                for e in range(ptr[v], ptr[v + 1]):
                    w = idx[e]
                    if mark[w] == _BWD or (prune and (_tree_reaches(w, t, tree_lo, tree_post)
                                                      or _hub_reaches(w, t, down, up))):
                        found = True
                        break
                    if mark[w] != 0:
                        continue
                    mark[w] = _FWD
                    touched[nt] = w
                    nt += 1
                    if not prune or _may_reach(w, t, level, inner, outer, down, up):
                        fb[nn] = w
                        nn += 1
                        en += ptr[w + 1] - ptr[w]
                if found:
                    break
            fa, fb = fb, fa
            nf = nn
            ef = en
        else:  # backward: parents of the frontier that s may still be above
            en = 0
            for i in range(nb):
                v = ba[i]
                for e in range(rptr[v], rptr[v + 1]):
                    w = ridx[e]
                    if mark[w] == _FWD or (prune and (_tree_reaches(s, w, tree_lo, tree_post)
                                                      or _hub_reaches(s, w, down, up))):
                        found = True
                        break
                    if mark[w] != 0:
                        continue
                    mark[w] = _BWD
                    touched[nt] = w
                    nt += 1
                    if not prune or _may_reach(s, w, level, inner, outer, down, up):
                        bb[nn] = w
                        nn += 1
                        en += rptr[w + 1] - rptr[w]
                if found:
                    break
            ba, bb = bb, ba
            nb = nn
            eb = en
    for i in range(nt):
        mark[touched[i]] = 0
    return found


@njit(**_JIT)
def bidir_block(us, ts, ptr, idx, rptr, ridx, level, inner, outer, tree_lo, tree_post, down, up,
                prune, mark, fa, fb, ba, bb, touched, out):
    """Answers of the pairs us[i] -> ts[i] into ``out`` (one thread's block of pairs; the
    scratch arrays have one entry per vertex, ``mark`` handed back zeroed)."""
    for i in range(us.shape[0]):
        out[i] = _bidir_one(us[i], ts[i], ptr, idx, rptr, ridx, level, inner, outer, tree_lo,
                            tree_post, down, up, prune, mark, fa, fb, ba, bb, touched)
