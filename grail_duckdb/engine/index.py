"""The reachability index: build it from edges (the whole pipeline), query it, save and load it.

ingest -> ids -> CSR -> condensation -> labels -> index file; queries -> cuts -> search.

>>> import grail_duckdb as gd
>>> idx = gd.build_index([1, 2, 3], [2, 3, 1], backend="cpu")   # a 3-cycle
>>> idx.reaches([1, 3, 1, None], [3, 2, 9, 1]).to_pylist()
[True, True, False, None]
>>> idx.reaches(1, 3), idx.reaches(1, 9)
(True, False)
>>> idx
GrailIndex(vertices=3, edges=3, components=1, dag_edges=0, labels=9, key_type='int', backend='cpu')
"""
from __future__ import annotations

import hashlib
import threading
import time
from dataclasses import dataclass, field

import numpy as np

from ..kernels import Kernels, kernels_for, to_host
from ..kernels.protocol import QueryIndex, search_edge_levels
from ..errors import EdgeInputError, IndexNotSavedError
from ..model import Labels, VertexIds
from ..progress import BUILD_PHASES, build_progress
from .. import indexfile
from . import queries
from .condensation import Condensation, condense
from .csr import CSR, forward_and_reverse
from .ids import assign_pairs, assign_read, read_edges
from .ingest import edge_stream
from .labels import grail_labels

#: GRAIL label pairs d by default: 9 fill the GPU's 128-byte label record (with two hub words a
#: side) that 5 left a third empty, and each interval the exact search tests inside a pair
#: prunes the vertices it queues (10M random pairs against d = 5: 21% faster on the 2.5B-edge
#: citation graph, 14% at 250M edges and on the 3.8M-vertex one, H200; the CPU backend within
#: 3%); they cost 32 bytes more per component on the host and 22% more file
DEFAULT_LABELS = 9
DEFAULT_SEED = 0
#: the DAG of :meth:`GrailIndex.host_labels`: no rows (the host copy classifies, never searches)
_NO_DAG = CSR(np.zeros(1, np.int64), np.zeros(0, np.int32))
#: the largest number of label pairs a build accepts: each pair costs 8 bytes per component and
#: a pass of the build, and beyond a few dozen they settle no more queries
MAX_LABELS = 64


class PhaseTimer:
    """Wall-clock seconds per named phase, in order; calls ``progress(phase, seconds)``."""

    def __init__(self, progress=None, sync=None):
        self.phases: dict[str, float] = {}
        self._progress = progress
        self._sync = sync or (lambda: None)
        self._t = time.perf_counter()

    def __call__(self, name: str) -> None:
        self._sync()
        now = time.perf_counter()
        self.phases[name] = self.phases.get(name, 0.0) + (now - self._t)
        self._t = now
        if self._progress is not None:
            self._progress(name, self.phases[name])

    @property
    def total(self) -> float:
        return sum(self.phases.values())


def _is_scalar(x) -> bool:
    """One key (a Python or NumPy scalar, or None), as opposed to a column."""
    return x is None or isinstance(x, (str, bytes, int, np.integer))


@dataclass(repr=False)
class GrailIndex:
    """An exact reachability index over one edge list.

    Attributes: ``ids`` (keys <-> dense vertex ids), ``comp`` (component of each vertex),
    ``dag`` (forward CSR of the condensed DAG), ``labels`` (levels, GRAIL intervals, tree
    intervals, hub sets), ``edge_rows`` (rows of the source edge table), ``fingerprint``
    (content hash of the source edges), ``build_seconds`` (per phase), ``kernels`` (the backend
    whose arrays these are; ``backend`` is its name, 'cpu' or 'gpu').
    """

    ids: VertexIds
    comp: object
    n_components: int
    dag: CSR
    labels: Labels
    seed: int
    edge_rows: int
    fingerprint: str
    kernels: Kernels
    build_seconds: dict = field(default_factory=dict)
    #: the steps of the save a build made (``build_index(..., save_to=...)``), in seconds
    save_seconds: dict = field(default_factory=dict)
    last_stats: queries.QueryStats | None = None
    _host_copy: "GrailIndex | None" = None
    _host_labels: QueryIndex | None = None
    _query_index: QueryIndex | None = None
    _lock: threading.Lock = field(default_factory=threading.Lock)

    @property
    def backend(self) -> str:
        return self.kernels.name

    @property
    def n_vertices(self) -> int:
        return self.ids.n

    @property
    def d(self) -> int:
        return self.labels.d

    @property
    def key_kind(self) -> str:
        return self.ids.kind

    def __repr__(self) -> str:
        return (f"GrailIndex(vertices={self.n_vertices}, edges={self.edge_rows}, "
                f"components={self.n_components}, dag_edges={self.dag.m}, labels={self.d}, "
                f"key_type={self.key_kind!r}, backend={self.backend!r})")

    def reaches(self, src, dst):
        """Whole columns in, a pyarrow BooleanArray out (NULL where either key is NULL); two
        single keys in, a bool (or None) out.

        Statistics of the call (how many queries each cut settled) are left in ``last_stats``.
        """
        if _is_scalar(src) and _is_scalar(dst):
            return self.reaches([src], [dst])[0].as_py()
        answers, stats = self.reaches_with_stats(src, dst)
        self.last_stats = stats
        return answers

    def reaches_with_stats(self, src, dst, *, use_cuts: bool = True, words: int | None = None,
                           budget: int = queries.PROBE_BUDGET, cancel=None):
        """Like :meth:`reaches` but returns ``(answers, QueryStats)``; ``use_cuts=False``
        answers with the plain multi-source bitmask BFS (no label pruning); ``budget``: edges
        of the bounded search of each pair no cut settles; ``cancel``: an Event or a callable
        that stops the call (see :mod:`grail_duckdb.engine.queries`).

        On a GPU index, calls of fewer than ``GpuSettings.host_below`` queries are classified
        on the host (:meth:`classifier`), the pairs no cut settles searched on the device."""
        return queries.reaches(self, src, dst, use_cuts=use_cuts,
                               words=words or queries.SEARCH_WORDS, budget=budget,
                               cancel=cancel)

    def classifier(self, pairs: int):
        """``(kernels, query index, probe)`` that classify a call of ``pairs`` pairs: the
        index's own, with the bounded search (``probe``). On a GPU index, a call of fewer
        than ``GpuSettings.host_below`` pairs is classified on the host, from
        :meth:`host_labels` (a launch and two copies cost more than the CPU kernels spend on
        a DuckDB chunk of 2,048 rows); there is no DAG there (``probe`` False): the pairs
        the cuts leave go to the device's search, the only device work such a call does."""
        if self.backend == "gpu" and pairs < self.kernels.settings.host_below:
            return kernels_for("cpu"), self.host_labels(), False
        return self.kernels, self.query_index(), True

    def host_labels(self) -> QueryIndex:
        """What the host classifies a small call of a GPU index from (made once, then kept):
        the key lookup, the components and the labels (levels, GRAIL intervals, tree
        intervals, hub bits) as host arrays, without the DAG (the device searches)."""
        qi = self._host_labels
        if qi is not None:
            return qi
        with self._lock:
            if self._host_labels is None:
                mode, offset, size, table = self.ids.lookup(np)
                comp = None if self.n_components == self.n_vertices else to_host(self.comp)
                lab = Labels(**{name: to_host(a) for name, a in self.labels.arrays().items()})
                self._host_labels = QueryIndex(mode, offset, size, table, comp, _NO_DAG, lab)
            return self._host_labels

    def query_index(self, need_reverse: bool = False) -> QueryIndex:
        """What the query kernels read (made once; the reverse DAG and the levels beside the
        edges, which only the exact search of deferred pairs reads, on first need)."""
        qi = self._query_index
        if qi is not None and (qi.rev is not None or not need_reverse):
            return qi
        with self._lock:
            if self._query_index is None:
                mode, offset, size, table = self.ids.lookup(self.kernels.xp)
                comp = None if self.n_components == self.n_vertices else self.comp
                self._query_index = QueryIndex(mode, offset, size, table, comp, self.dag,
                                               self.labels)
                self.kernels.synchronize()  # uploads done before other streams read them
            qi = self._query_index
            if need_reverse and qi.rev is None:
                rev = CSR(*self.kernels.reverse(self.dag))
                levels = search_edge_levels(self.kernels, self.dag, rev, self.labels.level)
                self.kernels.synchronize()  # made before other threads' streams read them
                qi.edge_levels = levels
                qi.rev = rev  # last: a thread that sees rev finds the levels too
            return qi

    def host_copy(self) -> "GrailIndex":
        """The same index on the CPU backend (made once, then kept)."""
        if self.backend == "cpu":
            return self
        with self._lock:
            if self._host_copy is None:
                self._host_copy = self.to_backend("cpu")
            return self._host_copy

    def summary(self) -> dict:
        return {
            "vertices": self.n_vertices,
            "edges": self.edge_rows,
            "components": self.n_components,
            "dag_edges": self.dag.m,
            "labels": self.d,
            "seed": self.seed,
            "key_type": self.key_kind,
            "backend": self.backend,
            "build_seconds": round(sum(self.build_seconds.values()), 6),
        }

    def to_backend(self, backend) -> "GrailIndex":
        """The same index with its arrays moved to another backend ('cpu', 'gpu' or a
        :class:`~grail_duckdb.kernels.protocol.Kernels` instance)."""
        k = kernels_for(backend)
        if k is self.kernels:
            return self
        return _on_backend(k, ids=self.ids, comp=self.comp, n_components=self.n_components,
                           dag=self.dag, labels=self.labels, seed=self.seed,
                           edge_rows=self.edge_rows, fingerprint=self.fingerprint,
                           build_seconds=dict(self.build_seconds))

    def save(self, path, **kw):
        """Write the index as Parquet, atomically (see :func:`grail_duckdb.indexfile.save`)."""
        return indexfile.save(self, path, **kw)


def _on_backend(k: Kernels, *, comp, dag, labels, **fields) -> GrailIndex:
    """A :class:`GrailIndex` of the given fields, its arrays moved to the backend of ``k``."""
    move = k.xp.asarray if k.xp is not np else to_host
    lab = k.query_labels(Labels(**{name: move(a) for name, a in labels.arrays().items()}))
    return GrailIndex(comp=move(comp), dag=CSR(move(dag.indptr), move(dag.indices)), labels=lab,
                      kernels=k, **fields)


def load_index(path, *, expect_fingerprint: str | None = None, backend=None) -> GrailIndex:
    """Load a saved index onto a backend (see :func:`grail_duckdb.indexfile.load`:
    read on every core, straight into the backend's arrays)."""
    k = kernels_for(backend)
    data = indexfile.load(path, expect_fingerprint=expect_fingerprint, xp=k.xp)
    return _on_backend(k, **vars(data))


def fingerprint_of(kernels: Kernels, ids: VertexIds, pairs) -> str:
    """Content hash of an edge list, independent of row order (duplicates count).

    Combines a hash of the distinct keys (a 64-bit sum of hashed integer keys, or a digest of
    the sorted strings) with an order-independent 64-bit sum of the hashed packed edges
    (``src id << 32 | dst id``) and the row count.
    """
    h = hashlib.blake2b(digest_size=16)
    if ids.key_range() is not None:  # keys offset..offset+n-1: made where they are hashed
        offset, n = ids.key_range()
        keys = kernels.xp.arange(offset, offset + n, dtype=kernels.xp.int64)
        h.update(kernels.key_hash_sum(keys).to_bytes(8, "little"))
        del keys
    elif ids.kind == "int":
        keys = ids.keys.to_numpy(zero_copy_only=False)
        h.update(kernels.key_hash_sum(keys).to_bytes(8, "little"))
    else:
        for buf in ids.keys.buffers():
            if buf is not None:
                h.update(memoryview(buf))
    h.update(f"{ids.kind}:{ids.n}".encode())
    h.update(int(pairs.shape[0]).to_bytes(8, "little"))
    h.update(kernels.edge_hash_sum(pairs).to_bytes(8, "little"))
    return h.hexdigest()


def edges_fingerprint(edges, dst="dst", *, src: str = "src") -> str:
    """The content fingerprint of an edge list, without building an index (CPU)."""
    ids, pairs = assign_pairs(edge_stream(edges, dst, src=src))
    return fingerprint_of(kernels_for("cpu"), ids, pairs)


def check_labels(labels) -> int:
    """The number of label pairs as an int in 1..MAX_LABELS, or an :class:`EdgeInputError`
    (a ``ValueError`` too) that says so."""
    try:
        d = int(labels)
    except (TypeError, ValueError):
        raise EdgeInputError(f"labels must be a whole number from 1 to {MAX_LABELS}, got "
                             f"{labels!r}") from None
    if not 1 <= d <= MAX_LABELS:
        raise EdgeInputError(f"labels must be from 1 to {MAX_LABELS}, got {d} "
                             f"({DEFAULT_LABELS} is the default; more than a few dozen settle "
                             "no more queries)")
    return d


def build_index(edges, dst="dst", *, src: str = "src", labels: int = DEFAULT_LABELS,
                seed: int = DEFAULT_SEED, backend=None, progress=None,
                save_to=None) -> GrailIndex:
    """Build an index from an edge list.

    ``build_index(table, src="citing", dst="cited")``: ``edges`` is a pyarrow Table /
    RecordBatch / RecordBatchReader, a DuckDB relation or the path of a Parquet file or of a
    folder of them, and the strings ``src`` and ``dst`` name its endpoint columns (default
    ``"src"``, ``"dst"``; the names SQL's ``grail_index(t, src := ..., dst := ...)`` and the
    command line's ``--src``/``--dst`` use too). ``build_index(src_keys, dst_keys)``: two
    columns of keys (pyarrow, NumPy, lists). ``labels`` is the number d of GRAIL label pairs
    (1..MAX_LABELS), ``seed`` makes them reproducible, ``backend`` is 'cpu', 'gpu', 'auto'
    (default: ``GRAIL_DUCKDB_BACKEND``, then auto) or a
    :class:`~grail_duckdb.kernels.protocol.Kernels` instance. ``progress``: None (default)
    shows a progress line on stderr for builds that run over 2 s
    (:class:`grail_duckdb.progress.BuildProgress`; ``GRAIL_DUCKDB_PROGRESS=0`` silences it),
    False shows nothing, a callable ``(phase, seconds)`` is called after each phase instead.

    Phases (``build_seconds``): ``ingest`` (the input checked), ``read`` (the keys read, a
    Parquet input decoded, and packed into the device's array: :mod:`.transfer`), ``ids``
    (keys -> dense ids in that array), ``fingerprint``, ``csr``, ``scc``, the label passes.

    ``save_to``: a path the index is also saved to, as :meth:`GrailIndex.save` would (the
    ETL path: the command line's ``build``), or a :class:`~grail_duckdb.indexfile.IndexWriter` (SQL's
    ``grail_index``: it records the edge table's description). The file's children, 42% of
    it at 2.5B edges, are written while the labels are computed, its levels, trees and
    intervals while the hub bits are, and the rest after them, as one last phase, ``save``.
    A build that fails leaves the old file (if any) as it was; a build whose file cannot be
    written raises :class:`~grail_duckdb.errors.IndexNotSavedError` (an ``OSError``), whose
    ``index`` is the built index.

    Memory: the input stays on the host (Arrow chunks, or Parquet files read row
    group by row group); the device holds one uint64 per edge (the packed ids), from which the
    forward and reverse rows are made in place; once the rows exist the packed edges are
    freed, and the input graph's rows are freed as soon as the condensed DAG no longer needs
    them.
    """
    with build_progress(progress, phases=BUILD_PHASES + (save_to is not None)) as report:
        return _build(edges, dst, src, labels, seed, backend, report, save_to)


def _build(edges, dst, src, labels, seed, backend, progress, save_to=None) -> GrailIndex:
    """The pipeline of :func:`build_index`, each phase reported to ``progress``; with
    ``save_to``, the file's checks come first (a path that is not an index of ours is refused
    before any work) and its children are written from the condensation on."""
    d = check_labels(labels)
    k = kernels_for(backend)
    writer = (save_to if save_to is None or isinstance(save_to, indexfile.IndexWriter)
              else indexfile.IndexWriter(save_to))
    try:
        timer = PhaseTimer(progress, k.synchronize)
        stream = edge_stream(edges, dst, src=src)
        timer("ingest")
        read = read_edges(stream, k.xp)
        timer("read")
        ids, pairs = assign_read(read, k.xp)
        rows = stream.rows
        del stream, read
        timer("ids")
        fp = fingerprint_of(k, ids, pairs)
        timer("fingerprint")
        graph = list(forward_and_reverse(k, pairs, ids.n))
        del pairs
        timer("csr")
        cond: Condensation = condense(k, graph)
        del graph
        timer("scc")
        if writer is not None:
            writer.write_children(ids, cond.comp, cond.n_components, cond.dag, d)
        lab = grail_labels(k, cond, d, int(seed), timer,
                           on_intervals=None if writer is None else writer.write_intervals)
        index = GrailIndex(ids=ids, comp=cond.comp, n_components=cond.n_components,
                           dag=cond.dag, labels=lab, seed=int(seed), edge_rows=rows,
                           fingerprint=fp, kernels=k)
    except BaseException:
        if writer is not None:
            writer.discard()
        raise
    index.build_seconds = dict(timer.phases)
    if writer is not None:
        try:
            writer.finish(index, timings=index.save_seconds)
        except OSError as exc:
            raise IndexNotSavedError(f"the index was built but not saved to {writer.path}: "
                                     f"{exc.strerror or exc}; the exception's index holds it "
                                     "(save it elsewhere with .save(path))", index) from exc
        timer("save")
        index.build_seconds = dict(timer.phases)
    return index


__all__ = ["DEFAULT_LABELS", "DEFAULT_SEED", "GrailIndex", "MAX_LABELS",
           "PhaseTimer", "build_index", "check_labels", "edges_fingerprint", "fingerprint_of",
           "load_index"]
