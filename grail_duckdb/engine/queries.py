"""Whole columns of (src, dst) keys -> exact reachability answers.

Each batch of pairs goes through one fused pass of the backend (``Kernels.answer_pairs``):

* NULL on either side: NULL; equal keys: true (the empty path), also for keys that are not
  vertices; a key that is not a vertex (and differs from the other): false;
* same strongly connected component: true;
* the topological level cut, the spanning-tree cut (the target lies in the source's
  spanning-tree interval: true), the d GRAIL label containments and the hub sets (false),
  then the hub cuts (the source reaches a hub that reaches the target: true);
* a pair no cut settles gets a bounded depth-first search (at most ``budget`` edges, pruned
  by the same cuts at every vertex): most pairs of shallow graphs end there;
* the pairs left over go to the exact search (``Kernels.search_pairs``), those of several
  batches together (``Kernels.search_together``: on the GPU, up to 4M; on the CPU, each
  batch's own): a bidirectional, label-pruned search per pair on either backend (a thread per
  pair on the CPU, a warp or a block per pair on the GPU).
  The multi-query bitmask search (GRAIL GPU paper, Section 5, Algorithm 7) answers calls
  with ``use_cuts=False``, the bench's plain baseline.

Every call records how many pairs each step settled (:class:`QueryStats`).

Long calls: pairs are answered in batches (``Kernels.query_batch`` pairs; the exact search
in blocks); between two batches or blocks the call reports progress
(:class:`grail_duckdb.progress.PairsProgress`, silent for calls under 2 s: its time left
comes from the rate of each kind of work, the cuts and the deep search) and can stop:

* **Ctrl-C** in the main thread raises ``KeyboardInterrupt`` at the next batch or block
  boundary (every kernel call is short; none holds the interpreter for long);
* **cancel**: pass ``cancel=`` a ``threading.Event`` or a callable returning True to stop the
  call from elsewhere (the SQL layer wires DuckDB's interrupt to it); the call then raises
  :class:`QueryCancelled` within a batch or a block (well under a second), leaving no state
  behind.
"""
from __future__ import annotations

from dataclasses import asdict, dataclass

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from ..errors import GrailError
from ..kernels import shared as K
from ..kernels import to_host
from ..kernels.host.keys import KeysBeyondInt64
from ..model import beyond_int64
from ..progress import PairsProgress
from .keys import KeyColumn, as_arrow, int64_view, kernel_keys, key_column, pair_pieces

#: 64-bit words per vertex of the plain multi-source BFS (``use_cuts=False``) at least
SEARCH_WORDS = 1
#: edges the bounded search of one undecided pair may cross before it is deferred
PROBE_BUDGET = 256

class QueryCancelled(GrailError):
    """A query call stopped by its ``cancel`` hook."""


@dataclass
class QueryStats:
    """How the queries of one call were settled (each query counted once, except that
    ``bounded_search`` + ``deep_search`` split ``searched``, and ``search_reachable`` counts
    the searched pairs found reachable)."""

    queries: int = 0
    null: int = 0
    same_key: int = 0
    unknown_vertex: int = 0
    same_component: int = 0
    level_cut: int = 0
    label_cut: int = 0
    tree_cut: int = 0
    hub_cut: int = 0
    searched: int = 0
    bounded_search: int = 0
    deep_search: int = 0
    search_reachable: int = 0

    def as_dict(self) -> dict:
        return asdict(self)

    @classmethod
    def from_counts(cls, queries: int, c, deep_found: int) -> "QueryStats":
        """The statistics of a call from its summed status counts."""
        c = c.tolist() if isinstance(c, np.ndarray) else [int(x) for x in c]
        bounded = c[K.PROBE_REACHES] + c[K.PROBE_EXCLUDES]
        return cls(queries=queries, null=c[K.NULL_PAIR], same_key=c[K.SAME_VERTEX] + c[K.SAME_KEY],
                   unknown_vertex=c[K.UNKNOWN], same_component=c[K.SAME_COMPONENT],
                   level_cut=c[K.LEVEL_CUT], label_cut=c[K.LABEL_CUT], tree_cut=c[K.TREE_CUT],
                   hub_cut=c[K.HUB_CUT], searched=bounded + c[K.DEFERRED],
                   bounded_search=bounded, deep_search=c[K.DEFERRED],
                   search_reachable=c[K.PROBE_REACHES] + deep_found)


def _stopper(cancel):
    """A function that raises QueryCancelled once ``cancel`` (an Event, a callable or None)
    says so."""
    if cancel is None:
        return lambda: None
    is_set = cancel.is_set if hasattr(cancel, "is_set") else cancel

    def check():
        if is_set():
            raise QueryCancelled("the reachability query was cancelled")
    return check


def reaches(index, src, dst, *, use_cuts: bool = True, words: int = SEARCH_WORDS,
            budget: int = PROBE_BUDGET, cancel=None):
    """Answers for whole columns: ``(pyarrow.BooleanArray, QueryStats)``.

    ``src``, ``dst``: key columns of any layout (:func:`.keys.key_column`), read where they
    lie. ``use_cuts=False`` sends every pair of different components to the plain
    multi-source bitmask BFS with no pruning at all (the bench's baseline). ``budget``: edges
    of the bounded search per undecided pair (0: none). ``cancel``: see the module's notes.
    """
    cs, ct = key_column(src, "source"), key_column(dst, "destination")
    if cs.n != ct.n:
        raise ValueError(f"src and dst differ in length ({cs.n} vs {ct.n})")
    try:
        if not _mixed_beyond_int64(cs, ct):
            return _reaches(index, cs, ct, use_cuts, words, budget, cancel)
    except KeysBeyondInt64:  # the device's staged keys cannot hold them: masked below
        pass
    a, b = as_arrow(cs), as_arrow(ct)
    beyond = _beyond_int64(a, b)
    if beyond is None:  # only under NULLs
        return _reaches(index, cs, ct, use_cuts, words, budget, cancel)
    mask, same = beyond
    a, b = (pc.if_else(mask, pa.scalar(None, c.type), c) for c in (a, b))
    answers, stats = _reaches(index, key_column(a), key_column(b), use_cuts, words, budget,
                              cancel)
    return pc.if_else(mask, same, answers), stats


def _reaches(index, cs, ct, use_cuts, words, budget, cancel):
    """:func:`reaches` of two key columns (:class:`.keys.KeyColumn`)."""
    nq = cs.n
    ks, kt, valid = _kernel_columns(index, cs, ct)
    k, qi, probe = index.classifier(nq)
    budget = budget if use_cuts and probe else 0
    stop = _stopper(cancel)
    batch = int(k.query_batch)
    bits = None
    counts = np.zeros(K.N_STATUS, np.int64)
    found_deep = 0
    deferred = _Deferred(index, k, use_cuts, words, stop)
    progress = PairsProgress("reaches", nq)
    searched = 0
    try:
        for lo in range(0, nq, batch):
            stop()
            hi = min(nq, lo + batch)
            with progress.phase("classify"):
                bks, bkt = pair_pieces(ks, kt, lo, hi)
                part = k.answer_pairs(qi, bks, bkt, None if valid is None else valid[lo:hi],
                                      use_cuts, budget)
                counts += part.counts
                if lo == 0 and hi == nq:
                    bits = part.bits
                else:
                    if bits is None:
                        bits = np.empty((nq + 7) >> 3, np.uint8)
                    bits[lo >> 3:(hi + 7) >> 3] = part.bits
                deferred.add(part, lo)
            progress.classified(hi, counts[K.DEFERRED])
            if deferred.pairs >= index.kernels.search_together or (hi == nq and deferred.pairs):
                waiting = deferred.pairs
                with progress.phase("search"):
                    found_deep += deferred.search(
                        bits, lambda done, s=searched: progress.searched(s + done))
                searched += waiting
                progress.searched(searched)
    finally:
        progress.close()
    stats = QueryStats.from_counts(nq, counts, found_deep)
    return _as_arrow(nq, bits, valid), stats


def answer_chunk(index, src, dst) -> pa.BooleanArray:
    """The answers of one small call, a DuckDB chunk (NULL where a key is NULL): one fused
    pass over the pairs and, when some are left, one exact search of those; no statistics,
    progress line or cancel hook (the calls of a chunked statement are short, and DuckDB
    reports and interrupts the statement). Two Arrow int64 columns of one chunk and no NULLs
    (what DuckDB hands the BIGINT function) are read as they are, with nothing else done per
    call. A call larger than one batch, or of keys that must be masked, takes
    :func:`reaches`."""
    plain = int64_view(src), int64_view(dst)
    if plain[0] is not None and plain[1] is not None and plain[0].shape == plain[1].shape:
        index.ids.check_kind(pa.int64())
        (ks, kt), valid, nq = plain, None, plain[0].shape[0]
    else:
        cs, ct = key_column(src, "source"), key_column(dst, "destination")
        if ct.n != cs.n:
            raise ValueError(f"src and dst differ in length ({cs.n} vs {ct.n})")
        if cs.n == 0 or _mixed_beyond_int64(cs, ct):
            return reaches(index, src, dst)[0]
        ks, kt, valid = _kernel_columns(index, cs, ct)
        ks, kt = pair_pieces(ks, kt, 0, cs.n)
        nq = cs.n
    k, qi, probe = index.classifier(nq)
    if nq > k.query_batch:
        return reaches(index, src, dst)[0]
    try:
        part = k.answer_pairs(qi, ks, kt, valid, True, PROBE_BUDGET if probe else 0)
    except KeysBeyondInt64:
        return reaches(index, src, dst)[0]
    if part.counts[K.DEFERRED]:
        deferred = _Deferred(index, k, True, SEARCH_WORDS, None)
        deferred.add(part, 0)
        deferred.search(part.bits)
    return _as_arrow(nq, part.bits, valid)


def _kernel_columns(index, cs: KeyColumn, ct: KeyColumn):
    """``(source keys, destination keys, valid)`` as the kernels read them (string keys
    looked up, numbered across both columns); ``valid`` None or one byte per pair."""
    unknown: dict = {}  # string keys that are not vertices, numbered across both columns
    ks, kt = kernel_keys(index.ids, cs, unknown), kernel_keys(index.ids, ct, unknown)
    vs, vt = ks.valid, kt.valid
    return ks, kt, vs if vt is None else (vt if vs is None else vs & vt)


class _Deferred:
    """The deferred pairs of a call's batches, kept (copied off the thread's reusable
    buffers) until ``Kernels.search_together`` of them wait or the call ends, then searched
    exactly in one go on the index's backend: the search's rounds run on as many pairs as
    possible, whatever the batch size. ``classifier``: the kernels whose batches these are
    (the host's for the small calls of a GPU index, see ``GrailIndex.classifier``)."""

    def __init__(self, index, classifier, use_cuts, words, stop):
        self.index, self.use_cuts, self.words, self.stop = index, use_cuts, words, stop
        self.classifier = classifier
        self.parts: list = []
        self.pairs = 0

    def add(self, part, lo: int) -> None:
        """Keep a batch's deferred pairs (its rows moved by the batch's first row ``lo``)."""
        n = int(part.counts[K.DEFERRED])
        if n:
            rows, u, t = part.deferred
            self.parts.append((lo, to_host(rows[:n]), u[:n].copy(), t[:n].copy()))
            self.classifier.synchronize()  # copied before the next batch reuses the lists
            self.pairs += n

    def search(self, bits, report=None) -> int:
        """Search the kept pairs, set their answer bits; returns how many reach. ``report``
        (None: no checkpoints, so the device's rounds are not polled) gets the pairs done."""
        k = self.index.kernels
        qi = self.index.query_index(need_reverse=self.use_cuts)
        los, rows, us, ts = zip(*self.parts)
        rows = np.concatenate([r.astype(np.int64) + lo for lo, r in zip(los, rows)])
        u, t = _joined(k.xp, us), _joined(k.xp, ts)
        k.synchronize()  # joined (or uploaded) before the search's own stream reads them
        self.parts, self.pairs = [], 0

        def checkpoint(done):
            self.stop()
            report(done)

        found = k.search_pairs(qi, u, t, self.use_cuts, self.words,
                               None if report is None else checkpoint)
        hit = rows[found]
        np.bitwise_or.at(bits, hit >> 3, (1 << (hit & 7)).astype(np.uint8))
        return int(hit.shape[0])


def _joined(xp, parts):
    """Host or device arrays as one array of ``xp``."""
    if len(parts) == 1:
        return xp.asarray(parts[0])
    return xp.concatenate([xp.asarray(p) for p in parts])


def _mixed_beyond_int64(s: KeyColumn, t: KeyColumn) -> bool:
    """Whether a uint64 key column beside a column of another integer type may hold a key
    above 2**63 - 1 (the pair then cannot share one key type of the kernels: such keys are
    masked; a key under a NULL counts here, :func:`_beyond_int64` tells)."""
    if s.kind != "int" or t.kind != "int" or not s.pieces or not t.pieces:
        return False
    types = {s.pieces[0].dtype, t.pieces[0].dtype}
    if len(types) == 1 or np.dtype(np.uint64) not in types:
        return False
    limit = np.uint64(np.iinfo(np.int64).max)
    return any(bool((p > limit).any()) for c in (s, t) for p in c.pieces
               if p.dtype == np.uint64)


def _beyond_int64(src: pa.Array, dst: pa.Array):
    """``(mask, x = y)`` for integer key columns where a uint64 key lies above 2**63 - 1 (never
    a vertex: the contract answers x = y there, NULL with a NULL), else None."""
    bits = [b for b in (beyond_int64(src), beyond_int64(dst)) if b is not None]
    if not bits:
        return None
    mask = pa.array(np.logical_or.reduce(bits))
    exact = pa.decimal128(20, 0)  # holds every int64 and uint64 value
    same = pc.equal(src.cast(_value_type(src)).cast(exact), dst.cast(_value_type(dst)).cast(exact))
    return mask, same


def _value_type(col: pa.Array) -> pa.DataType:
    return col.type.value_type if pa.types.is_dictionary(col.type) else col.type


def _as_arrow(nq, bits, valid) -> pa.BooleanArray:
    """The answer bitmap as an Arrow boolean array (no copy), NULL where ``valid`` is 0."""
    if nq == 0:
        return pa.array([], pa.bool_())
    mask = None
    if valid is not None:
        mask = pa.py_buffer(np.packbits(valid, bitorder="little"))
    return pa.BooleanArray.from_buffers(pa.bool_(), nq, [mask, pa.py_buffer(bits)],
                                        null_count=-1 if mask is not None else 0)
