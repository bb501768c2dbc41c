"""The one interface to the hot loops: every operation the pipeline and the queries need.

Two backends implement it with identical results: :class:`~grail_duckdb.kernels.cpu.CpuKernels`
(Numba, NumPy arrays) and :class:`~grail_duckdb.kernels.gpu.GpuKernels` (CuPy arrays and the CUDA
sources in the repository's ``kernels/*.cu``). The pipeline modules call only these methods,
with arrays of the backend's own array module ``xp``, so each algorithm is written once.

Rules every implementation keeps:

* **No hidden state between calls.** What a backend keeps (compiled modules, launch sizes,
  per-thread scratch) belongs to its instance and is safe under concurrent calls from several
  threads: results depend only on the arguments.
* **Tuning knobs are settings of the instance** (``GpuKernels(GpuSettings(...))``), never module
  globals, so two differently tuned instances can run side by side.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from types import ModuleType
from typing import Any, Protocol, runtime_checkable

Array = Any  # a NumPy or CuPy array, of the backend's array module


@dataclass(frozen=True)
class CSR:
    """Compressed sparse rows, the one graph layout every stage and both backends share: the
    out-neighbours of vertex v are ``indices[indptr[v]:indptr[v + 1]]``.

    ``indptr`` is int64 (n + 1), ``indices`` int32 (m); both live on the backend that built
    them (NumPy or CuPy arrays).
    """

    indptr: Array
    indices: Array

    @property
    def n(self) -> int:
        return int(self.indptr.shape[0]) - 1

    @property
    def m(self) -> int:
        return int(self.indices.shape[0])

    @property
    def nbytes(self) -> int:
        return int(self.indptr.nbytes + self.indices.nbytes)


@dataclass(frozen=True)
class TopoOrder:
    """A topological order of a DAG, level by level (Kahn's sweep).

    ``level[v]`` is the longest path from a root to v, ``order`` lists the vertices by
    non-decreasing level, and level L occupies ``order[offsets[L]:offsets[L + 1]]``
    (``offsets``: ``levels + 1`` entries). All three are arrays of the backend.

    ``sweep``, where a backend has one: another topological order (every parent before its
    children) for the sweeps over every edge that walk one vertex after another and need no
    levels: the ids themselves where they are in a topological order (citation graphs often
    are), whose neighbours then lie near each other in memory; None: they walk ``order``.
    (The tree sweeps keep ``order``: there a level's roots come together, a branch
    predicted.)"""

    level: Array
    order: Array
    offsets: Any
    sweep: Any = None

    @property
    def walk(self):
        """The order a sweep that needs no levels walks: ``sweep``, else ``order``."""
        return self.order if self.sweep is None else self.sweep

    @property
    def levels(self) -> int:
        return int(len(self.offsets)) - 1


class LabelArrays(Protocol):
    """What the query kernels read of the labels (see :class:`grail_duckdb.engine.labels.Labels`)."""

    level: Array
    inner: Array
    outer: Array
    tree: Array
    hub_down: Array
    hub_up: Array


@dataclass
class QueryIndex:
    """Everything the query kernels read, as arrays of one backend.

    ``lookup`` turns query keys into vertex ids: ``(mode, offset, size, table)`` with mode one
    of :mod:`.shared`'s LOOKUP_* codes (dense: ``table`` int32 ids of keys offset, offset + 1,
    ...; sorted: ``table`` the int64 keys of ids 0, 1, ...; ids: the keys are ids already;
    range: keys offset .. offset + size - 1 are ids 0 .. size - 1; ``table`` empty for the
    last two; ``size``: the range's keys or the table's entries). ``comp`` is None when every
    component is one vertex. ``rev`` (the reverse DAG) and ``edge_levels``
    (:meth:`Kernels.edge_levels` of the DAG and of ``rev``) are filled in by the engine before
    the first search that needs them.
    """

    lookup_mode: int
    lookup_offset: int
    lookup_size: int
    lookup_table: Array
    comp: Array | None
    dag: CSR
    labels: LabelArrays
    rev: CSR | None = None
    edge_levels: tuple | None = None
    #: the CPU classification's arguments after the keys, made on first use
    classify_args: tuple | None = field(default=None, repr=False, compare=False)

    @property
    def footprint(self) -> int:
        """Bytes of the index's arrays on the backend (the DAG, the labels, the components)."""
        arrays = [self.dag.indptr, self.dag.indices, *self.labels.arrays().values()]
        if self.comp is not None:
            arrays.append(self.comp)
        return int(sum(int(a.nbytes) for a in arrays if hasattr(a, "nbytes")))


def search_edge_levels(kernels, dag: CSR, rev: CSR, level) -> tuple:
    """What ``QueryIndex.edge_levels`` holds: :meth:`Kernels.edge_levels` of the DAG and of
    the reverse DAG (the exact search's level cut, read beside each edge)."""
    return kernels.edge_levels(dag, level), kernels.edge_levels(rev, level)


def edge_levels_of(kernels, qi: QueryIndex) -> tuple:
    """``qi.edge_levels``, made and kept on first need (the engine makes them with the reverse
    DAG, under its lock; a direct caller of the kernels gets them here)."""
    if qi.edge_levels is None:
        qi.edge_levels = search_edge_levels(kernels, qi.dag, qi.rev, qi.labels.level)
    return qi.edge_levels


@dataclass(frozen=True)
class PathGraph:
    """What hop counts and paths read: the original graph's rows both ways (self-loops and
    duplicate edges dropped, which no shortest path uses) and the index's condensation, whose
    levels cut vertices off a search: ``comp`` (component of each vertex, None when every
    component is one vertex), ``level`` (int32 per component) and ``edge_levels`` (int16 per
    edge of ``fwd`` and of ``rev``: the level of the far end's component, saturated at
    :data:`.shared.EDGE_LEVEL_CAP`). All arrays of one backend."""

    fwd: CSR
    rev: CSR
    comp: Array | None
    level: Array
    edge_levels: tuple


@dataclass
class PairAnswers:
    """What :meth:`Kernels.answer_pairs` gives back for one batch of pairs.

    ``bits``: host uint8 bitmap in Arrow's order (bit q % 8 of byte q // 8) with a 1 for every
    pair settled true; ``counts``: host int64 count of each status code (:mod:`.shared`);
    ``deferred``: ``(rows, u, t)`` on the backend, the rows of the pairs left to
    :meth:`Kernels.search_pairs` and their components (valid until the thread's next call).
    """

    bits: Any
    counts: Any
    deferred: tuple


@runtime_checkable
class Kernels(Protocol):
    """Every operation of the pipeline (ids -> CSR -> condensation -> labels) and of the queries
    (cuts -> search), on one backend."""

    name: str  # 'cpu' or 'gpu'
    xp: ModuleType  # numpy or cupy
    query_batch: int  # pairs per batch of a query call
    search_together: int  # deferred pairs a call's batches gather before their exact search

    def synchronize(self) -> None:
        """Wait for queued device work (a no-op on the CPU)."""

    # --- CSR ---------------------------------------------------------------------------------
    def csr_of_pairs(self, pairs: Array, n: int) -> tuple[Array, Array]:
        """Rows of packed edges (uint64 ``src << 32 | dst``, ids below 2**31, see
        :func:`.shared.pack_pairs`): ``(indptr, indices)``, each row's targets sorted,
        self-loops and duplicate targets dropped. ``pairs`` may be reordered (the GPU sorts it
        in place: no second copy of the edges)."""

    def csr(self, src: Array, dst: Array, n: int) -> tuple[Array, Array]:
        """:meth:`csr_of_pairs` of two id columns."""

    def csr_both_ways(self, pairs: Array, n: int) -> tuple[CSR, CSR]:
        """The rows of packed edges (:meth:`csr_of_pairs`) and the rows of the same edges
        reversed, with the same guarantees; ``pairs`` is consumed (reordered, overwritten)."""

    def reverse(self, g: CSR) -> tuple[Array, Array]:
        """``(indptr, indices)`` of ``g`` with every edge reversed, duplicates kept; the order
        within a row is not set (the CPU's rows are sorted, the GPU's follow its atomics), and
        the scratch is 8 bytes per row at most (the exact search makes it on first need)."""

    def edge_levels(self, g: CSR, level: Array) -> Array:
        """int16 per edge of ``g``: the level of the edge's target, saturated at
        :data:`.shared.EDGE_LEVEL_CAP` (the exact search's level cut, read beside the edge)."""

    # --- condensation (Multistep) ------------------------------------------------------------
    def trim(self, fwd: CSR, rev: CSR, alive: Array) -> int:
        """Peel live vertices with no live in- or out-edge, repeatedly (``alive`` updated in
        place); returns how many were removed."""

    def reach_within_colour(self, g: CSR, seeds: Array, colour: Array) -> Array:
        """bool[n]: vertices reached from a seed through vertices of the seed's colour
        (negative colour: dead)."""

    def propagate_max_colour(self, g: CSR, colour: Array) -> None:
        """Fixpoint of colour[w] = max(colour[w], colour[v]) over edges between live vertices."""

    def rank_by_first_occurrence(self, label: Array) -> tuple[Array, int]:
        """Labels renumbered 0..k-1 in order of first occurrence, and k."""

    def representatives(self, comp: Array) -> Array:
        """bool[n]: the rows that are their component's first, of components numbered by
        first occurrence (:meth:`rank_by_first_occurrence`): a save writes each component's
        children on that row."""

    def component_pairs(self, g: CSR, comp: Array) -> Array:
        """Every edge of ``g`` as a packed pair of components, ``comp[v] << 32 | comp[w]``
        (edges inside a component become self-loops, which :meth:`csr_of_pairs` drops)."""

    # --- labels (GRAIL GPU paper, Section 4) ----------------------------------------------------
    def topological_levels(self, fwd: CSR, rev: CSR) -> TopoOrder:
        """Levels and a level-by-level order of a DAG (Algorithm 2's sweep)."""

    def acyclic_levels(self, fwd: CSR, rev: CSR) -> TopoOrder | None:
        """:meth:`topological_levels` of a graph that may have cycles: None when it has one
        (the sweep then leaves some vertex unvisited). The condensation asks this first: a
        graph without cycles needs none of its steps."""

    def largest_rows(self, g: CSR, count: int) -> Array:
        """The ids of the ``count`` rows with the most entries (all rows if fewer), by
        entries descending, ties by id ascending: ``argsort(-degree, stable)[:count]``
        (the hubs, :mod:`grail_duckdb.engine.labels`)."""

    def tree_parents(self, rev: CSR, level: Array) -> Array:
        """int32[n]: the smallest-id in-neighbour one level above, or -1 (step 1)."""

    def subtree_sizes(self, parent: Array, topo: TopoOrder) -> Array:
        """int32[n]: tree descendants of each vertex, itself included (step 2, Algorithm 4);
        ``topo`` lists every tree parent before its children."""

    def tree_children(self, fwd: CSR, level: Array) -> Array:
        """int32[n]: the out-neighbour of smallest level (ties: smallest id), or -1: each
        vertex's link in the tree of chosen children (:mod:`grail_duckdb.engine.labels`)."""

    def post_orders(self, parent: Array, topo: TopoOrder, size: Array, d: int,
                    seed: int) -> Array:
        """int32[n, d]: post ranks for d sibling orders (step 3, Algorithm 5)."""

    def interval_bounds(self, fwd: CSR, topo: TopoOrder, post: Array) -> tuple[Array, Array]:
        """(inner, outer) int32[n, d]: min and max post rank over every DAG descendant (step 4,
        Algorithm 6). ``post`` is consumed (the CPU makes ``inner`` in its place)."""

    def hub_bits(self, fwd: CSR, rev: CSR, topo: TopoOrder, hub_of: Array,
                 words: int, first: Array | None = None) -> tuple[Array, Array]:
        """(down, up) uint64[n, words]: the hubs each vertex reaches / that reach it; with
        ``first`` (int32[levels + 1], hubs above each level), each vertex's window of them
        (cpu/hubs.hub_bits)."""

    def hub_and_window_bits(self, fwd: CSR, rev: CSR, topo: TopoOrder, hub_of: Array,
                            words: int, win_of: Array, win_words: int,
                            first: Array) -> tuple[Array, Array, Array, Array]:
        """``(down, up, win_down, win_up)``: :meth:`hub_bits` of the global hubs (``hub_of``,
        ``words``) and of the window hubs (``win_of``, ``win_words``, ``first``) at once (the
        CPU walks the DAG once for both)."""

    # --- appends (:mod:`grail_duckdb.engine.append`) ------------------------------------------
    def append_fold(self, rows: CSR, topo: TopoOrder, inner: Array, outer: Array, down: Array,
                    wdown: Array, base: Array, span: int) -> None:
        """Fold the labels of appended components from their children's, in place.

        ``rows``: the appended components' children in local ids (the appended ones first,
        then the built components they point to, whose rows of ``inner``/``outer`` (int32
        [., d]), ``down`` (uint64 [., hub words]) and ``wdown`` (uint64 [., window words])
        hold their labels); ``topo``: the appended ones, every child at a lower level. A
        component with children gets the smallest inner, the largest outer, the OR of the hub
        words and of the window words rebased by ``base`` (each row's first window hub,
        ``span`` 64 window words) of its children; one without keeps its row
        (cpu/append.append_fold)."""

    def gather_labels(self, lab: LabelArrays, ids: Array, inner: Array, outer: Array,
                      down: Array, wdown: Array, base: Array) -> None:
        """Row i of ``inner``, ``outer``, ``down`` from built component ``ids[i]``'s labels in
        ``lab`` (its GRAIL intervals and hub words); where ``lab`` has windows, row i of
        ``wdown`` its window words and ``base[i]`` its window's first hub (``win_first`` at
        its level, the table's nearest end outside it). The fold's rows of the built children
        (:meth:`append_fold`)."""

    # --- queries (Section 5) -------------------------------------------------------------------
    def query_labels(self, lab: LabelArrays) -> LabelArrays:
        """The labels as this backend's query kernels read them, the same values: on the GPU
        packed into one record per component (:mod:`.records`; the arrays become views of it,
        and ``lab``'s own arrays can go), on the CPU ``lab`` itself."""

    def answer_pairs(self, qi: QueryIndex, ks, kt, valid, prune: bool = True,
                     budget: int = 256) -> PairAnswers:
        """One batch of key pairs in one fused pass: key lookup, component, every cut, the
        bounded search of at most ``budget`` edges per undecided pair (with ``prune``; 0: none,
        and the DAG is not read); the pairs left over come back as ``deferred``. ``ks``, ``kt``:
        host arrays of one key type and layout each, or tuples of such pieces (piece i of both
        covering the same rows; :mod:`.host.keys`), read where they lie; ``valid``: None or one
        byte per pair, 0 for NULL."""

    def search_pairs(self, qi: QueryIndex, u: Array, t: Array, prune: bool = True,
                     words: int = 1, checkpoint=None) -> Any:
        """Exact host bool answers of component pairs u[i] -> t[i] (the deferred pairs):
        label-pruned search with ``prune``, the plain multi-source bitmask BFS without it
        (``words`` 64-bit words per vertex at least). ``checkpoint(done)``, if given, is called
        from the calling thread while the search works (between blocks of pairs on the CPU,
        while each round runs on the GPU), at least once, with the pairs answered so far; an
        exception it raises stops the search."""

    def bitmask_search(self, dag: CSR, lab: LabelArrays, cs: Array, ct: Array,
                       words: int = 1, prune: bool = True) -> Array:
        """bool answers of component pairs by the label-pruned multi-query search
        (Algorithm 7), 64 * ``words`` queries per pass at least."""

    # --- hops, paths and counts (grail_duckdb/engine/paths.py, reach_counts.py) -------------
    def pair_hops(self, g: PathGraph, s: Any, t: Any, limits: Any, want_paths: bool = False,
                  checkpoint=None) -> tuple:
        """Shortest distances of vertex pairs s[i] -> t[i] (host int32 ids, s[i] != t[i])
        within limits[i] edges (host int32): ``(hops, paths)``, hops a host int32 array (-1:
        no path of at most limits[i] edges); with ``want_paths``, ``paths`` is ``(offsets,
        vertices)`` (host int64 n + 1, host int32): pair i's lexicographically smallest
        shortest path is ``vertices[offsets[i]:offsets[i + 1]]`` (empty without one), else
        None. ``checkpoint(done)`` as for :meth:`search_pairs`."""

    def bounded_bfs(self, g: CSR, source: int, max_hops: int) -> tuple:
        """The vertices within ``max_hops`` edges of ``source`` over ``g`` and their hop
        counts: ``(vertices, hops)``, host int32 arrays, by hops then id."""

    def count_reached(self, g: CSR, order: Array, offsets: Any, sizes: Array,
                      words: int) -> Any:
        """Exact: host int64 per component c, the vertices of the components that c reaches
        in the DAG ``g``, its own included (``sizes``: vertices per component). ``order`` lists
        the components children first, in groups ``order[offsets[i]:offsets[i + 1]]`` with no
        edge inside a group; the sweep gives 64 * ``words`` components a bit at a time."""

    def sketch_reached(self, g: CSR, order: Array, offsets: Any, comp: Array | None,
                       n_components: int, precision: int,
                       registers: tuple[int, int] | None = None) -> tuple:
        """Approximate :meth:`count_reached`: a HyperLogLog sketch of 2**precision one-byte
        registers per component (each vertex v hashed by mix64(v), comp None: the identity)
        swept over ``g`` like the bits; ``(s1, zeros)`` per component, host uint64 / int32:
        the sum of 2**(64 - precision - r) over the nonzero registers r and the count of
        empty ones (exact integers, made into estimates on the host). ``registers``:
        ``(first, count)``, the slice of the registers swept (a multiple of 4 from a multiple
        of 4; default all): each register depends on its own vertices alone, so the sums of
        the slices of a sketch add up to the sketch's."""

    # --- fingerprints ---------------------------------------------------------------------------
    def parse_chunks(self, src: Array, chunks: Array, rest: Array, records: Array) -> None:
        """The LZ4 sequences of each 64 KiB chunk of pages (an index file's label pages,
        encoded on the backend: :mod:`grail_duckdb.indexfile.label_pages`)."""

    def emit_chunks(self, src: Array, chunks: Array, rest: Array, records: Array,
                    places: Array, out: Array) -> None:
        """Each chunk's bytes at its place in its page's LZ4 block."""

    def edge_hash_sum(self, pairs: Array) -> int:
        """Order-independent 64-bit sum of mix64 over packed edges ``src << 32 | dst``."""

    def key_hash_sum(self, keys: Array) -> int:
        """Order-independent 64-bit sum of mix64 over integer keys."""
