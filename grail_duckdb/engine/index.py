"""The reachability index: build it from edges (the whole pipeline), query it, save and load it.

ingest -> ids -> CSR -> condensation -> labels -> index file; queries -> cuts -> search.

>>> import grail_duckdb as gd
>>> idx = gd.build_index([1, 2, 3], [2, 3, 1], backend="cpu")   # a 3-cycle
>>> idx.reaches([1, 3, 1, None], [3, 2, 9, 1]).to_pylist()
[True, True, False, None]
>>> idx.reaches(1, 3), idx.reaches(1, 9)
(True, False)
>>> idx
GrailIndex(vertices=3, edges=3, components=1, dag_edges=0, labels=3, key_type='int', backend='cpu')
"""
from __future__ import annotations

import threading
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from ..kernels import Kernels, kernels_for, to_host
from ..kernels.protocol import QueryIndex, search_edge_levels
from ..errors import IndexNotSavedError, StaleIndexError
from ..model import Labels, VertexIds
from .. import indexfile
from ..indexfile import appends as _appends  # noqa: F401  (indexfile.appends)
from . import paths, queries, reach_counts
from .csr import CSR

#: the DAG of :meth:`GrailIndex.host_labels`: no rows (the host copy classifies, never searches)
_NO_DAG = CSR(np.zeros(1, np.int64), np.zeros(0, np.int32))
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
    whose arrays these are; ``backend`` is its name, 'cpu' or 'gpu'), ``edge_source`` (where
    an index with cycles reads its original edges again for hops and paths:
    :class:`~grail_duckdb.engine.paths.EdgeSource`, or None).
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
    edge_source: paths.EdgeSource | None = None
    #: the lowest level of any component (0 after a build; appended ones lie below it)
    level_floor: int = 0
    #: whether component i is vertex i (None: when there are as many components as vertices,
    #: as after a build; an append that renumbers the vertices says False)
    comp_identity: bool | None = None
    #: the batches absorbed since the index file was written (:mod:`.append`), in order
    appended: tuple = ()
    #: the index file this index was loaded from or saved to (its parts lie beside it)
    base_path: object = None
    #: how many of ``appended`` are written beside ``base_path`` as parts
    persisted: int = 0
    _host_copy: "GrailIndex | None" = None
    _path_graph: paths.PathGraph | None = None
    _path_lock: threading.Lock = field(default_factory=threading.Lock)
    _host_labels: QueryIndex | None = None
    _query_index: QueryIndex | None = None
    _lock: threading.Lock = field(default_factory=threading.Lock)
    _rooms: dict = field(default_factory=dict)  # the arrays' free rows (:mod:`.growth`)

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

    @property
    def identity(self) -> bool:
        """Whether component i is vertex i (the query kernels then skip the lookup)."""
        if self.comp_identity is not None:
            return self.comp_identity
        return self.n_components == self.n_vertices

    def append(self, edges, dst="dst", *, src: str = "src") -> "GrailIndex":
        """A new index with a batch of edges out of new vertices absorbed, without a rebuild
        (:mod:`grail_duckdb.engine.append`); this index answers as before.

        ``idx.append(src_keys, dst_keys)`` or ``idx.append(table, src="citing",
        dst="cited")``, as :func:`build_index` takes its edges. The new vertices (sources the
        index does not hold, and targets new to it) get labels that extend the built ones,
        cycles among them are condensed; an edge out of a vertex the index holds is absorbed
        only when it adds no path (a duplicate). :meth:`save` to the index's own file writes
        the batches as parts beside it (``load_index`` reads them back).

        Raises
        ------
        NotAppendableError
            An edge leaves a held vertex and adds a path, or the appended levels run out:
            build the index again from the grown edge list.

        Examples
        --------
        >>> import grail_duckdb as gd
        >>> idx = gd.build_index([1, 2], [2, 3], backend="cpu")
        >>> grown = idx.append([4, 5, 5], [1, 4, 2])
        >>> grown.reaches([5, 4, 1], [3, 3, 4]).to_pylist()
        [True, True, False]
        >>> idx.reaches(5, 3), grown.n_vertices
        (False, 5)
        """
        from .append import absorb

        return absorb(self, edges, dst, src=src)

    def __repr__(self) -> str:
        return (f"GrailIndex(vertices={self.n_vertices}, edges={self.edge_rows}, "
                f"components={self.n_components}, dag_edges={self.dag.m}, labels={self.d}, "
                f"key_type={self.key_kind!r}, backend={self.backend!r})")

    def reaches(self, src, dst):
        """Whether a directed path leads from each ``src`` key to its ``dst`` key.

        Parameters
        ----------
        src, dst : column of keys or one key each
            pyarrow arrays (chunked or not), NumPy arrays, pandas Series, lists; keys of the
            index's kind (integers of any width, or strings).

        Returns
        -------
        pyarrow.BooleanArray, or bool / None for two single keys
            The contract: NULL where a key is NULL, true for equal keys, false where a key is
            no vertex, else true iff a path exists. The call's statistics (how many pairs
            each cut settled, how many were searched) are left in ``last_stats``.

        Raises
        ------
        KeyTypeError
            Keys of the other kind than the index's (say to cast them).
        ValueError
            Columns of different lengths.

        Examples
        --------
        >>> import grail_duckdb as gd
        >>> idx = gd.build_index([1, 2], [2, 3], backend="cpu")
        >>> idx.reaches([1, 3, None], [3, 1, 2]).to_pylist()
        [True, False, None]
        >>> idx.reaches(2, 2), idx.last_stats.queries
        (True, 1)
        """
        if _is_scalar(src) and _is_scalar(dst):
            return self.reaches([src], [dst])[0].as_py()
        answers, stats = self.reaches_with_stats(src, dst)
        self.last_stats = stats
        return answers

    def reaches_with_stats(self, src, dst, *, use_cuts: bool = True, words: int | None = None,
                           budget: int = queries.PROBE_BUDGET, cancel=None):
        """:meth:`reaches` for columns, with the call's statistics.

        Parameters
        ----------
        src, dst : columns of keys
        use_cuts : bool
            False answers with the plain multi-source bitmask BFS (GRAIL GPU paper,
            Algorithm 7; no label pruning): the baseline.
        words : int, optional
            64-bit words per vertex of that search (64 pairs per word and pass).
        budget : int
            Edges the bounded search may cross per pair no cut settles.
        cancel : threading.Event or callable, optional
            Stops the call (:class:`~grail_duckdb.engine.queries.QueryCancelled`).

        Returns
        -------
        (pyarrow.BooleanArray, QueryStats)

        Notes
        -----
        On a GPU index, calls of fewer than ``GpuSettings.host_below`` pairs are classified
        on the host (:meth:`classifier`), the pairs no cut settles searched on the device:
        the same answers (every kernel has an identical CPU twin)."""
        return queries.reaches(self, src, dst, use_cuts=use_cuts,
                               words=words or queries.SEARCH_WORDS, budget=budget,
                               cancel=cancel)

    def reaches_within(self, src, dst, k):
        """Whether a directed path of at most ``k`` edges leads from src to dst.

        Parameters
        ----------
        src, dst : column of keys (pyarrow, NumPy, list) or one key each
        k : int or column of ints
            The most edges a path may have (a column: one bound per pair; NULL gives NULL).

        Returns
        -------
        pyarrow.BooleanArray, or a bool (None) for two single keys
            NULL where a key is NULL; equal keys are true for any k >= 0.

        Examples
        --------
        >>> import grail_duckdb as gd
        >>> idx = gd.build_index([1, 2], [2, 3], backend="cpu")
        >>> idx.reaches_within(1, 3, 1), idx.reaches_within(1, 3, 2)
        (False, True)
        """
        if _is_scalar(src) and _is_scalar(dst):
            return paths.reaches_within(self, [src], [dst], k)[0].as_py()
        return paths.reaches_within(self, src, dst, k)

    def hops(self, src, dst, cancel=None):
        """The number of edges of a shortest path from src to dst; NULL (None) when there is
        none, 0 for equal keys. Whole columns give a pyarrow Int32Array, two keys an int.

        Examples
        --------
        >>> import grail_duckdb as gd
        >>> idx = gd.build_index([1, 2, 1], [2, 3, 3], backend="cpu")
        >>> idx.hops([1, 3, 2], [3, 1, 2]).to_pylist()
        [1, None, 0]
        """
        if _is_scalar(src) and _is_scalar(dst):
            return paths.hops(self, [src], [dst])[0].as_py()
        return paths.hops(self, src, dst, cancel)

    def path(self, src, dst, cancel=None):
        """One shortest path from src to dst as a list of keys (src first, dst last): the
        lexicographically smallest one by key; None without a path, ``[x]`` from x to x.
        Whole columns give a pyarrow ListArray, two keys a list.

        Examples
        --------
        >>> import grail_duckdb as gd
        >>> idx = gd.build_index([1, 1, 2, 3], [3, 2, 4, 4], backend="cpu")
        >>> idx.path(1, 4), idx.path(4, 1)
        ([1, 2, 4], None)
        """
        if _is_scalar(src) and _is_scalar(dst):
            return paths.paths(self, [src], [dst])[0].as_py()
        return paths.paths(self, src, dst, cancel)

    def descendants(self, key, max_hops: int | None = None):
        """The keys ``key`` reaches within ``max_hops`` edges (None: any number), itself
        included, as a pyarrow Table ``(key, hops)`` by hops then key (see
        :func:`grail_duckdb.engine.paths.reached_within`).

        Examples
        --------
        >>> import grail_duckdb as gd
        >>> idx = gd.build_index([1, 2], [2, 3], backend="cpu")
        >>> idx.descendants(1, max_hops=1).to_pydict()
        {'key': [1, 2], 'hops': [0, 1]}
        """
        return paths.reached_within(self, key, True, max_hops)

    def ancestors(self, key, max_hops: int | None = None):
        """The keys that reach ``key`` within ``max_hops`` edges, itself included: a Table
        ``(key, hops)`` as :meth:`descendants` gives."""
        return paths.reached_within(self, key, False, max_hops)

    def reach_counts(self, mode: str = "auto", precision: int = reach_counts.DEFAULT_PRECISION):
        """For every vertex, how many vertices it reaches and how many reach it (itself
        excluded): a pyarrow Table ``key, reaches, reached_by, mode, rel_error``.

        Parameters
        ----------
        mode : {'auto', 'exact', 'approximate'}
            'auto' counts exactly where the work is within the backend's budget.
        precision : int
            2**precision registers per HyperLogLog sketch of the approximate mode.

        See :mod:`grail_duckdb.engine.reach_counts` for the definitions and the error bound.
        """
        return reach_counts.reach_counts(self, mode, precision)

    def attach_edges(self, edges, dst="dst", *, src: str = "src") -> "GrailIndex":
        """Where this index reads its original edges for hops and paths (an index with
        cycles loaded from a file has none): an edge input as :func:`build_index` takes
        (read when first needed, and checked against the index's fingerprint). Returns the
        index."""
        self.edge_source = paths.EdgeSource(lambda: edges, src, dst, "the attached edges")
        return self

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
                comp = None if self.identity else self.comp
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

    def answering(self, count: int) -> "GrailIndex":
        """The index that answers a call of ``count`` pairs: this one, or on a GPU index below
        ``GpuSettings.host_below`` pairs its host copy (a launch and two copies cost more
        than the CPU kernels spend on a small call; the answers are the same)."""
        if self.backend == "gpu" and count < self.kernels.settings.host_below:
            return self.host_copy()
        return self

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
        """The same index with its arrays moved to another backend.

        Parameters
        ----------
        backend : {'cpu', 'gpu', 'auto'} or Kernels

        Returns
        -------
        GrailIndex
            ``self`` when it is on that backend already."""
        k = kernels_for(backend)
        if k is self.kernels:
            return self
        return _on_backend(k, ids=self.ids, comp=self.comp, n_components=self.n_components,
                           dag=self.dag, labels=self.labels, seed=self.seed,
                           edge_rows=self.edge_rows, fingerprint=self.fingerprint,
                           build_seconds=dict(self.build_seconds), edge_source=self.edge_source,
                           level_floor=self.level_floor, comp_identity=self.comp_identity,
                           appended=self.appended, base_path=self.base_path,
                           persisted=self.persisted)

    def save(self, path, **kw):
        """Write the index to ``path`` as one Parquet file, atomically.

        An index with appended batches (:meth:`append`) saved to its own file (the one it
        was loaded from or built into) writes each batch not written yet as a part beside it
        (:mod:`grail_duckdb.indexfile.appends`); ``source`` is kept with the last part.

        Parameters
        ----------
        path : str or Path
            Conventionally ``<name>.grail.parquet`` (docs/index-format.md describes it).
        **kw
            ``source`` (a dict recorded in the file), ``fsync``, ``timings``, ``settings``
            (:class:`~grail_duckdb.indexfile.SaveSettings`): see
            :func:`grail_duckdb.indexfile.save`.

        Returns
        -------
        pathlib.Path

        Raises
        ------
        IndexFileError
            ``path`` holds something that is not an index of this project (refused before
            any work).
        IndexNotSavedError
            An index with appended batches saved anywhere but its own file (rebuild it
            there instead).
        OSError
            The file cannot be written; the old file (if any) stays as it was.

        Examples
        --------
        >>> import tempfile, pathlib, grail_duckdb as gd
        >>> path = pathlib.Path(tempfile.mkdtemp()) / "g.grail.parquet"
        >>> _ = gd.build_index([1, 2], [2, 3], backend="cpu").save(path)
        >>> gd.load_index(path, backend="cpu").reaches(1, 3)
        True
        """
        if not self.appended:
            out = indexfile.save(self, path, **kw)
            self.base_path, self.persisted = Path(out).resolve(), 0
            return out
        if self.base_path is None or Path(path).resolve() != Path(self.base_path):
            raise IndexNotSavedError(
                f"this index holds {len(self.appended)} appended batches; they are saved as "
                f"parts beside the index file they extend ({self.base_path}), not as a file of "
                f"their own at {path}: save to that file, or build the index from the grown "
                "edge list to write it elsewhere", self)
        self.save_parts(**kw)
        return Path(self.base_path)

    def save_parts(self, *, source: dict | None = None, fsync: bool = True) -> list:
        """Write the appended batches not written yet as parts beside :attr:`base_path`
        (each atomic; parts of another history numbered from the first one written are
        removed first); ``source`` goes with the last. Returns their paths."""
        if self.persisted == len(self.appended):
            return []
        indexfile.appends.remove_parts(self.base_path, after=self.persisted)
        out = []
        for i in range(self.persisted, len(self.appended)):
            batch = self.appended[i]
            last = i == len(self.appended) - 1
            out.append(indexfile.appends.write_part(
                self.base_path, i + 1, batch.on(np, labels=False), self.ids.kind,
                source=source if last else None, fsync=fsync))
        self.appended = tuple(b.slim() for b in self.appended)
        self.persisted = len(self.appended)
        return out


def _on_backend(k: Kernels, *, comp, dag, labels, **fields) -> GrailIndex:
    """A :class:`GrailIndex` of the given fields, its arrays moved to the backend of ``k``."""
    move = k.xp.asarray if k.xp is not np else to_host
    lab = k.query_labels(Labels(**{name: move(a) for name, a in labels.arrays().items()}))
    return GrailIndex(comp=move(comp), dag=CSR(move(dag.indptr), move(dag.indices)), labels=lab,
                      kernels=k, **fields)


def load_index(path, *, expect_fingerprint: str | None = None, backend=None) -> GrailIndex:
    """Load an index file onto a backend, read on every core straight into its arrays, with
    the batches appended to it since it was written (its parts: no rebuild).

    Parameters
    ----------
    path : str or Path
    expect_fingerprint : str, optional
        Refuse an index whose fingerprint, its parts applied, is another (the fingerprint of
        the current edges).
    backend : {'cpu', 'gpu', 'auto'} or Kernels, optional
        Default: ``GRAIL_DUCKDB_BACKEND``, then a GPU when CuPy sees one.

    Returns
    -------
    GrailIndex

    Raises
    ------
    IndexFileError
        A missing, truncated, damaged (digest) or foreign file or part, or one of another
        format version (the message names the version found and the one read).
    StaleIndexError
        ``expect_fingerprint`` differs.
    """
    k = kernels_for(backend)
    path = Path(path)
    meta = indexfile.read_metadata(path)
    parts = indexfile.appends.read_parts(path, meta.fingerprint)
    final = parts[-1][0].after if parts else meta.fingerprint
    if expect_fingerprint is not None and final != expect_fingerprint:
        raise StaleIndexError(f"the index at {path} was built from different edges than the "
                              "current ones; rebuild it (grail_index(..., rebuild := true) in "
                              "SQL or grail_duckdb.build_index(...).save(path))")
    data = indexfile.load(path, xp=k.xp)
    index = _on_backend(k, **vars(data), base_path=path.resolve())
    if parts:
        from .append import apply_batch, with_labels

        for _, batch in parts:
            index = apply_batch(index, with_labels(index, batch))
        index.appended = tuple(b.slim() for b in index.appended)
        index.persisted = len(index.appended)
    return index



__all__ = ["GrailIndex", "load_index"]
