"""The reachability index: build it from edges (the whole pipeline), query it, save it.

ingest -> ids -> CSR -> condensation -> labels (-> persistence, in :mod:`.persistence`).

>>> import grail_duckdb as gd
>>> idx = gd.build_index([1, 2, 3], [2, 3, 1] , backend="cpu")   # a 3-cycle
>>> idx.reaches([1, 3, 1, None], [3, 2, 9, 1]).to_pylist()
[True, True, False, None]
"""
from __future__ import annotations

import time
from dataclasses import dataclass, field


from . import backend as _backend
from . import queries
from .condensation import Condensation, condense
from .csr import CSR, forward_and_reverse
from .ids import VertexIds, assign_ids
from .ingest import edge_columns
from .labels import Labels, grail_labels

DEFAULT_LABELS = 5
DEFAULT_SEED = 0
#: a GPU index answers calls with fewer queries than this from its host copy: a kernel launch
#: and two copies cost more than the CPU kernels spend on a DuckDB chunk (2,048 rows)
GPU_MIN_QUERIES = 32_768


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


@dataclass
class GrailIndex:
    """An exact reachability index over one edge list.

    Attributes: ``ids`` (keys <-> dense vertex ids), ``comp`` (component of each vertex),
    ``dag`` (forward CSR of the condensed DAG), ``labels`` (levels, GRAIL intervals, tree
    intervals), ``edge_rows`` (rows of the source edge table), ``fingerprint`` (content hash of
    the source edges), ``build_seconds`` (per phase), ``backend`` ('cpu' or 'gpu').
    """

    ids: VertexIds
    comp: object
    n_components: int
    dag: CSR
    labels: Labels
    seed: int
    edge_rows: int
    fingerprint: str
    backend: str
    build_seconds: dict = field(default_factory=dict)
    last_stats: queries.QueryStats | None = None
    _host_copy: "GrailIndex | None" = field(default=None, repr=False)

    @property
    def kernels(self):
        return _backend.kernels_for(self.backend)

    @property
    def n_vertices(self) -> int:
        return self.ids.n

    @property
    def d(self) -> int:
        return self.labels.d

    @property
    def key_kind(self) -> str:
        return self.ids.kind

    def reaches(self, src, dst):
        """Whole columns in, a pyarrow BooleanArray out (NULL where either key is NULL).

        Statistics of the call (how many queries each cut settled) are left in ``last_stats``.
        """
        answers, stats = self.reaches_with_stats(src, dst)
        self.last_stats = stats
        return answers

    def reaches_with_stats(self, src, dst, *, use_cuts: bool = True, words: int | None = None):
        """Like :meth:`reaches` but returns ``(answers, QueryStats)``; ``use_cuts=False``
        answers with the plain multi-source bitmask BFS (no label pruning).

        On a GPU index, calls of fewer than ``GPU_MIN_QUERIES`` queries run on a host copy
        of the index (the same answers: every kernel has an identical CPU twin)."""
        target = self
        if self.backend == "gpu" and len(src) < GPU_MIN_QUERIES:
            if self._host_copy is None:
                self._host_copy = self.to_backend("cpu")
            target = self._host_copy
        return queries.reaches(target, src, dst, use_cuts=use_cuts,
                               words=words or queries.SEARCH_WORDS)

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

    def to_backend(self, name: str) -> "GrailIndex":
        """The same index with its arrays moved to another backend ('cpu' or 'gpu')."""
        target = _backend.resolve(name)
        if target == self.backend:
            return self
        k = _backend.kernels_for(target)
        move = k.xp.asarray if target == "gpu" else _backend.to_host
        lab = self.labels
        return GrailIndex(
            ids=self.ids, comp=move(self.comp), n_components=self.n_components,
            dag=CSR(move(self.dag.indptr), move(self.dag.indices)),
            labels=Labels(**{name: move(a) for name, a in lab.arrays().items()}),
            seed=self.seed, edge_rows=self.edge_rows, fingerprint=self.fingerprint,
            backend=target, build_seconds=dict(self.build_seconds))

    def save(self, path, **kw):
        """Write the index as Parquet, atomically (see :func:`grail_duckdb.persistence.save`)."""
        from .persistence import save

        return save(self, path, **kw)



def fingerprint_of(kernels, ids: VertexIds, src_ids, dst_ids) -> str:
    """Content hash of an edge list, independent of row order (duplicates count).

    Combines a hash of the distinct keys (a 64-bit sum of hashed integer keys, or a digest of
    the sorted strings) with an order-independent 64-bit sum of the hashed (src id, dst id)
    pairs and the row count.
    """
    import hashlib

    from .kernels.cpu import key_hash_sum

    h = hashlib.blake2b(digest_size=16)
    keys = ids.keys
    if ids.kind == "int":
        h.update(int(key_hash_sum(keys.to_numpy(zero_copy_only=False))).to_bytes(8, "little"))
    else:
        for buf in keys.buffers():
            if buf is not None:
                h.update(memoryview(buf))
    h.update(f"{ids.kind}:{ids.n}".encode())
    h.update(int(src_ids.shape[0]).to_bytes(8, "little"))
    h.update(kernels.edge_hash_sum(src_ids, dst_ids).to_bytes(8, "little"))
    return h.hexdigest()


def build_index(edges, dst=None, *, src_col: str = "src", dst_col: str = "dst",
                labels: int = DEFAULT_LABELS, seed: int = DEFAULT_SEED,
                backend: str | None = None, progress=None) -> GrailIndex:
    """Build an index from an edge list.

    ``edges`` is a pyarrow Table / RecordBatch (columns ``src_col`` and ``dst_col``), a DuckDB
    relation, or a source key column with ``dst`` the destination column. ``labels`` is the
    number d of GRAIL label pairs (>= 1), ``seed`` makes them reproducible, ``backend`` is
    'cpu', 'gpu' or 'auto' (default: ``GRAIL_DUCKDB_BACKEND``, then auto), ``progress`` an
    optional callable ``(phase, seconds)`` called after each phase.
    """
    if int(labels) < 1:
        raise ValueError(f"labels must be >= 1, got {labels}")
    which = _backend.resolve(backend)
    k = _backend.kernels_for(which)
    xp = k.xp
    timer = PhaseTimer(progress, getattr(k, "synchronize", None))
    cols = edge_columns(edges, dst, src_col=src_col, dst_col=dst_col)
    timer("ingest")
    ids, s_ids, d_ids = assign_ids(cols.src, cols.dst, cols.extra_vertices, xp=xp)
    timer("ids")
    s_dev, d_dev = xp.asarray(s_ids), xp.asarray(d_ids)
    fwd, rev = forward_and_reverse(k, s_dev, d_dev, ids.n)
    timer("csr")
    cond: Condensation = condense(k, fwd, rev)
    del fwd, rev
    timer("scc")
    lab = grail_labels(k, cond, int(labels), int(seed), timer)
    fp = fingerprint_of(k, ids, s_dev, d_dev)
    timer("fingerprint")
    return GrailIndex(ids=ids, comp=cond.comp, n_components=cond.n_components, dag=cond.dag,
                      labels=lab, seed=int(seed), edge_rows=cols.rows, fingerprint=fp,
                      backend=which, build_seconds=dict(timer.phases))
