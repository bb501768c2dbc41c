"""Building an index: the pipeline end to end, ingest -> ids -> CSR -> condensation ->
labels -> the index file (written as the build goes when asked), each phase timed.

>>> import grail_duckdb as gd
>>> idx = gd.build_index([1, 2, 3], [2, 3, 1], backend="cpu")   # a 3-cycle
>>> idx.n_components, sorted(idx.build_seconds)[:3]
(1, ['csr', 'fingerprint', 'ids'])
"""
from __future__ import annotations

import hashlib
import time

from .. import indexfile
from ..errors import EdgeInputError, IndexNotSavedError
from ..kernels import Kernels, kernels_for, resolve
from ..model import VertexIds
from ..progress import BUILD_PHASES, build_progress
from .condensation import Condensation, condense
from .csr import forward_and_reverse
from .ids import assign_pairs, assign_read, read_edges
from .index import GrailIndex
from .ingest import edge_stream
from . import paths
from .labels import grail_labels

__all__ = ["DEFAULT_LABELS", "DEFAULT_SEED", "MAX_LABELS", "PhaseTimer", "build_index",
           "check_labels", "default_labels", "edges_fingerprint", "fingerprint_of"]

#: GRAIL label pairs d of a build that names none, by backend. On a GPU 9 fill the 128-byte
#: label record (with two hub words a side), and each interval prunes the exact search (about
#: a fifth faster than 5 on deep citation graphs, for 32 bytes more per component). On the CPU
#: the post orders and the intervals take a sweep per pair, and on the bench's graphs and
#: query mixes 3 settle as many pairs as 9 in a build a fifth shorter (docs/benchmarks.md).
DEFAULT_LABELS = {"cpu": 3, "gpu": 9}
DEFAULT_SEED = 0
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
                             f"(the default: {DEFAULT_LABELS['cpu']} on the CPU, "
                             f"{DEFAULT_LABELS['gpu']} on a GPU; more than a few dozen settle "
                             "no more queries)")
    return d


def default_labels(backend=None) -> int:
    """The label pairs d of a build on ``backend`` (a name, None or ``Kernels``, as
    :func:`build_index` takes it) that names none: :data:`DEFAULT_LABELS`.

    >>> default_labels("cpu")
    3
    """
    return DEFAULT_LABELS[resolve(backend)]


def build_index(edges, dst="dst", *, src: str = "src", labels: int | None = None,
                seed: int = DEFAULT_SEED, backend=None, progress=None,
                save_to=None) -> GrailIndex:
    """Build an exact reachability index of an edge list.

    Parameters
    ----------
    edges : table, path, or a column of source keys
        A pyarrow Table / RecordBatch / RecordBatchReader, a DuckDB relation, or the path of
        a Parquet file or of a folder of them, whose columns ``src`` and ``dst`` hold the
        edges; or, with ``dst`` a column too, the source keys (pyarrow, NumPy, lists). Keys:
        integers of any width or strings; a NULL endpoint is an error.
    dst : str or column of keys
        The destination column's name (default ``"dst"``), or the destination keys.
    src : str
        The source column's name (default ``"src"``; SQL's ``grail_index(t, src := ...)``
        and the command line's ``--src`` use the same names).
    labels : int
        GRAIL label pairs d, 1..64 (default: 3 on the CPU, 9 on a GPU; see
        :data:`DEFAULT_LABELS`).
    seed : int
        Makes the labels reproducible.
    backend : {'cpu', 'gpu', 'auto'} or Kernels, optional
        Default: ``GRAIL_DUCKDB_BACKEND``, then a GPU when CuPy sees one. Asking for a GPU
        where there is none is an error, never a silent fallback.
    progress : None, False or callable
        None shows a progress line on stderr for builds over 2 s
        (``GRAIL_DUCKDB_PROGRESS=0`` silences it); False shows nothing; a callable
        ``(phase, seconds)`` is called after each phase instead.
    save_to : str, Path or IndexWriter, optional
        Also write the index file, as the build goes (the ETL path): its children while the
        labels are computed, the rest after them, as one last phase, ``save``.

    Returns
    -------
    GrailIndex
        Its ``build_seconds`` holds each phase's seconds (``ingest``, ``read``, ``ids``,
        ``fingerprint``, ``csr``, ``scc``, the label passes, ``save``).

    Raises
    ------
    EdgeInputError
        A missing column, a NULL endpoint, keys that are neither integers nor strings,
        ``labels`` out of range.
    IndexFileError
        ``save_to`` names something that is not an index of this project (before any work).
    IndexNotSavedError
        The index was built but its file could not be written (an ``OSError``); its
        ``index`` holds the built index. A failed build leaves the old file as it was.
    BackendError
        No GPU where one was asked for, or the device ran out of memory (with the bytes
        that were needed).

    Notes
    -----
    Memory: the input stays on the host (Arrow chunks, or Parquet row groups read one by
    one); the device holds one uint64 per edge (the packed ids), from which the forward and
    reverse rows are made in place, and the input graph's rows go as soon as the condensed
    DAG no longer needs them.

    Examples
    --------
    >>> import pyarrow as pa, grail_duckdb as gd
    >>> cites = pa.table({"citing": [3, 2, 2], "cited": [2, 1, 1]})
    >>> idx = gd.build_index(cites, src="citing", dst="cited", backend="cpu")
    >>> idx.n_vertices, idx.edge_rows, idx.reaches(3, 1)
    (3, 3, True)
    """
    with build_progress(progress, phases=BUILD_PHASES + (save_to is not None)) as report:
        return _build(edges, dst, src, labels, seed, backend, report, save_to)


def _build(edges, dst, src, labels, seed, backend, progress, save_to=None) -> GrailIndex:
    """The pipeline of :func:`build_index`, each phase reported to ``progress``; with
    ``save_to``, the file's checks come first (a path that is not an index of ours is refused
    before any work) and its children are written from the condensation on."""
    d = None if labels is None else check_labels(labels)
    k = kernels_for(backend)
    d = d or default_labels(k)
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
                           fingerprint=fp, kernels=k,
                           edge_source=None if cond.n_components == ids.n
                           else paths.EdgeSource.of_input(edges, dst, src))
    except BaseException:
        if writer is not None:
            writer.discard()
        raise
    index.build_seconds = dict(timer.phases)
    if writer is not None:
        try:
            index.base_path = writer.finish(index, timings=index.save_seconds).resolve()
        except OSError as exc:
            raise IndexNotSavedError(f"the index was built but not saved to {writer.path}: "
                                     f"{exc.strerror or exc}; the exception's index holds it "
                                     "(save it elsewhere with .save(path))", index) from exc
        timer("save")
        index.build_seconds = dict(timer.phases)
    return index
