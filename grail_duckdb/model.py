"""The data model that the engine and the index file share: vertex ids, CSR, labels.

The engine builds these (:mod:`grail_duckdb.engine`), the index file writes and reads them
(:mod:`grail_duckdb.indexfile`); neither imports the other. An index is:

* :class:`VertexIds`: the sorted distinct keys (id i is the i-th) and the lookup from key to id;
* the component of every vertex (int32, numbered by their first vertex) and the condensed DAG
  as a :class:`~grail_duckdb.kernels.protocol.CSR` over components;
* :class:`Labels`: per component, its level, GRAIL intervals, two spanning-tree intervals and
  hub bits;
* :class:`IndexData`: all of it with the seed, the edge rows and the fingerprint of the source.

Arrays live on one backend (NumPy, or CuPy on a GPU).
"""
from __future__ import annotations

from dataclasses import dataclass, field, replace

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from .errors import EdgeInputError, KeyTypeError
from .growth import grow, roomy
from .jit import njit
from .kernels.cpu.cores import cores, on_cores, task_range
from .kernels.protocol import CSR, TopoOrder
from .kernels.shared import LOOKUP_DENSE, LOOKUP_IDS, LOOKUP_RANGE, LOOKUP_SORTED

__all__ = ["AppendBatch", "CSR", "DENSE_FACTOR", "IndexData", "Labels", "TopoOrder",
           "VertexIds", "as_int64", "as_large_string", "beyond_int64", "key_kind"]


def key_kind(typ: pa.DataType) -> str:
    """'int' or 'str' for a supported key type; anything else is an error."""
    if pa.types.is_integer(typ):
        return "int"
    if pa.types.is_string(typ) or pa.types.is_large_string(typ) or pa.types.is_string_view(typ):
        return "str"
    if pa.types.is_dictionary(typ):
        return key_kind(typ.value_type)
    raise EdgeInputError(
        f"vertex keys must be integers or strings (VARCHAR), got {typ}; cast the key columns "
        "first, e.g. CAST(col AS BIGINT) or CAST(col AS VARCHAR)"
    )


#: dense lookup tables are used while (max - min + 1) <= DENSE_FACTOR * (number of endpoints)
DENSE_FACTOR = 4


@njit(read_only=("keys",), cache=True, nogil=True, boundscheck=False)
def lookup_dense_task(task, tasks, keys, offset, table, out):
    """``out[i] = table[keys[i] - offset]``, or -1 outside the table, over task ``task``'s
    share of the keys (:func:`~grail_duckdb.kernels.cpu.cores.on_cores`)."""
    lo, hi = task_range(keys.shape[0], task, tasks)
    size = table.shape[0]
    for i in range(lo, hi):
        j = keys[i] - offset
        out[i] = table[j] if 0 <= j < size else -1
    return 0


@njit(read_only=("old",), cache=True, nogil=True, boundscheck=False)
def table_moved_task(task, tasks, old, at, table):
    """``table`` (every entry) = ``old`` from ``at`` on and -1 around it, over task ``task``'s
    share of ``table``: a grown lookup table written once, on every core (a billion-edge
    index's table is hundreds of megabytes)."""
    lo, hi = task_range(table.shape[0], task, tasks)
    for i in range(lo, hi):
        j = i - at
        table[i] = old[j] if 0 <= j < old.shape[0] else -1
    return 0


#: keys per task of a dense lookup: a smaller call runs on the calling thread alone
LOOKUP_TASK_KEYS = 1 << 18


def lookup_dense(keys, offset, table):
    """table[key - offset], or -1 outside the table (int32), on every core for many keys
    (an append looks up the citations of a million papers)."""
    out = np.empty(keys.shape[0], np.int32)
    tasks = min(cores(), 1 + keys.shape[0] // LOOKUP_TASK_KEYS)
    on_cores(lookup_dense_task, tasks, keys, offset, table, out)
    return out


def one_array(col) -> pa.Array:
    """An Arrow array or chunked array as one array: a lone chunk as it is (``combine_chunks``
    copies even then: 80 MB for a column of ten million keys)."""
    if not isinstance(col, pa.ChunkedArray):
        return col
    return col.chunk(0) if col.num_chunks == 1 else col.combine_chunks()


def as_int64(arr: pa.Array) -> np.ndarray:
    """Integer keys as int64 NumPy (uint64 keys above 2**63 - 1 are refused, not wrapped)."""
    if pa.types.is_dictionary(arr.type):
        arr = arr.dictionary_decode()
    if pa.types.is_uint64(arr.type) and len(arr) and pc.max(arr).as_py() > np.iinfo(np.int64).max:
        raise EdgeInputError("uint64 vertex keys above 2**63-1 are not supported")
    return arr.to_numpy(zero_copy_only=False).astype(np.int64, copy=False)


def beyond_int64(arr: pa.Array) -> np.ndarray | None:
    """Where a uint64 key column holds keys above 2**63 - 1 (bools), or None where it holds
    none (or is no uint64 column). Such a key is never a vertex: vertex keys are int64.

    >>> beyond_int64(pa.array([1, 2**64 - 1, None], pa.uint64())).tolist()
    [False, True, False]
    """
    if pa.types.is_dictionary(arr.type):
        arr = arr.dictionary_decode()
    if not pa.types.is_uint64(arr.type) or len(arr) == 0:
        return None
    big = pc.greater(arr, pa.scalar(np.iinfo(np.int64).max, pa.uint64())).fill_null(False)
    return big.to_numpy(zero_copy_only=False) if pc.any(big).as_py() else None


def as_large_string(arr: pa.Array) -> pa.Array:
    if pa.types.is_dictionary(arr.type):
        arr = arr.dictionary_decode()
    return arr.cast(pa.large_string()) if not pa.types.is_large_string(arr.type) else arr


@dataclass
class VertexIds:
    """The sorted distinct keys (``keys[i]`` is the key of id i) and a lookup from key to id.

    Keys that are a whole range ``offset .. offset + n - 1`` (the generators' and the .gra
    files' 0..n-1) are held as that range: the key column and the lookup table are made on
    first use, so neither the build nor a load spends a pass on them."""

    _keys: pa.Array | None
    kind: str
    _offset: int = 0
    _table: np.ndarray | None = None  # dense int lookup: id of key (offset + i), or -1
    _sorted: np.ndarray | None = None  # sparse int lookup: the sorted keys
    _map: dict | None = field(default=None, repr=False)  # string lookup, built on first use
    _device_tables: dict = field(default_factory=dict, repr=False)  # array module -> table
    _count: int | None = None  # keys offset .. offset + count - 1 (``_keys`` made on first use)
    _room: object = field(default=None, repr=False)  # the table's free rows (:mod:`.growth`)

    @classmethod
    def of_range(cls, offset: int, n: int) -> "VertexIds":
        """The keys ``offset .. offset + n - 1``, id = key - offset.

        >>> ids = VertexIds.of_range(10, 3)
        >>> ids.n, ids.keys.to_pylist(), ids.key_range()
        (3, [10, 11, 12], (10, 3))
        """
        return cls(None, "int", _offset=int(offset), _count=int(n))

    @property
    def keys(self) -> pa.Array:
        if self._keys is None:
            self._keys = pa.array(np.arange(self._offset, self._offset + self._count,
                                            dtype=np.int64))
        elif isinstance(self._keys, pa.ChunkedArray):  # an append's: joined on first use
            self._keys = self._keys.combine_chunks()
        return self._keys

    @property
    def n(self) -> int:
        return self._count if self._count is not None else len(self._keys)

    def key_range(self) -> tuple[int, int] | None:
        """``(offset, n)`` when the keys are exactly ``offset .. offset + n - 1``, else None."""
        return None if self._count is None else (self._offset, self._count)

    def fresh(self) -> "VertexIds":
        """The same keys with lookups of their own (for an index on another device)."""
        if self._count is not None:
            return VertexIds.of_range(self._offset, self._count)
        if self._table is not None:  # (its keys need not be sorted: an appended index's)
            return VertexIds(self._keys, self.kind, _offset=self._offset, _table=self._table)
        return VertexIds.from_sorted_keys(self._keys)

    @classmethod
    def from_sorted_keys(cls, keys: pa.Array) -> "VertexIds":
        """Rebuild the lookup for keys already sorted and distinct (e.g. read from an index)."""
        kind = key_kind(keys.type)
        if kind == "str":
            return cls(as_large_string(keys), "str")
        k = as_int64(keys)
        if k.shape[0] and int(k[-1]) - int(k[0]) == k.shape[0] - 1:
            return cls.of_range(int(k[0]), k.shape[0])  # sorted and distinct: a whole range
        return cls._for_ints(k, int(k.shape[0]))

    @classmethod
    def _for_ints(cls, sorted_keys: np.ndarray, endpoints: int) -> "VertexIds":
        keys = pa.array(sorted_keys, pa.int64())
        if sorted_keys.shape[0] == 0:
            return cls(keys, "int", _sorted=sorted_keys)
        lo, hi = int(sorted_keys[0]), int(sorted_keys[-1])
        if hi - lo + 1 <= DENSE_FACTOR * max(endpoints, sorted_keys.shape[0]) + 1024:
            table = roomy(np, (hi - lo + 1,), np.int32)  # room for appended keys past its end
            table.fill(-1)
            table[sorted_keys - lo] = np.arange(sorted_keys.shape[0], dtype=np.int32)
            return cls(keys, "int", _offset=lo, _table=table)
        return cls(keys, "int", _sorted=sorted_keys)

    def appended(self, new_keys: pa.Array) -> tuple["VertexIds", np.ndarray | None]:
        """These keys and ``new_keys`` (distinct, none of them a key here; integers sorted):
        ``(ids, moved)``. New key i takes id ``n + i`` (``moved`` None) unless the keys are
        integers held as sorted keys (sparse ones: the lookup is a search in their order)
        and a new one sorts before an old one: then the merged keys are numbered afresh and
        ``moved`` is the int64 array ``[old id -> id, then new key i -> id]``. Integer keys
        of a small range keep a lookup table (made anew, the old one unchanged); string keys
        share their lookup dict with this ``VertexIds``, which treats ids from ``n`` on as
        unknown keys. The keys of ids from ``n`` on follow the old ones unsorted.

        >>> ids, moved = VertexIds.of_range(0, 3).appended(pa.array([3, 4]))
        >>> ids.key_range(), moved
        ((0, 5), None)
        >>> ids, moved = VertexIds.of_range(0, 3).appended(pa.array([-1, 7]))
        >>> ids.keys.to_pylist(), moved, ids.encode(pa.array([7, -1, 0])).tolist()
        ([0, 1, 2, -1, 7], None, [4, 3, 0])
        >>> far = VertexIds.from_sorted_keys(pa.array([0, 10**12]))
        >>> ids, moved = far.appended(pa.array([-5]))
        >>> ids.keys.to_pylist(), moved.tolist()
        ([-5, 0, 1000000000000], [1, 2, 0])
        """
        k = len(new_keys)
        if k == 0:
            return self, None
        if self.kind == "str":
            new = as_large_string(new_keys)
            keys = pa.concat_arrays([as_large_string(self.keys), new]) if self.n else new
            out = VertexIds(keys, "str", _map=self._map)
            if self._map is not None:
                n = self.n
                for i, key in enumerate(new.to_pylist()):
                    self._map[key] = n + i
            return out, None
        new = as_int64(new_keys)
        if self.n == 0:
            return VertexIds.from_sorted_keys(pa.array(new, pa.int64())), None
        rng = self.key_range()
        if rng is not None and int(new[0]) == rng[0] + rng[1] and int(new[-1]) - int(new[0]) == k - 1:
            return VertexIds.of_range(rng[0], rng[1] + k), None
        old_lo, old_hi = self._bounds()
        lo, hi = min(old_lo, int(new[0])), max(old_hi, int(new[-1]))
        if hi - lo + 1 <= DENSE_FACTOR * (self.n + k) + 1024:
            return self._with_table(new, lo, hi), None
        old = as_int64(self.keys)
        if self._sorted is not None and int(new[0]) > int(old[-1]):
            return VertexIds._for_ints(np.concatenate([old, new]), self.n + k), None
        every = np.concatenate([old, new])  # sparse keys: numbered afresh in their order
        order = np.argsort(every, kind="stable")
        moved = np.empty(self.n + k, np.int64)
        moved[order] = np.arange(self.n + k, dtype=np.int64)
        return VertexIds._for_ints(every[order], self.n + k), moved

    def _bounds(self) -> tuple[int, int]:
        """The smallest and the largest integer key."""
        if self._count is not None:
            return self._offset, self._offset + self._count - 1
        if self._table is not None:
            return self._offset, self._offset + self._table.shape[0] - 1
        return int(self._sorted[0]), int(self._sorted[-1])

    def _with_table(self, new: np.ndarray, lo: int, hi: int) -> "VertexIds":
        """These keys and ``new`` (sorted; ids from n on) through a lookup table of keys
        lo..hi: this table grown in its room where every new key lies past its end (its
        entries stay as they are: this ``VertexIds`` answers as before), else a new one."""
        ids = np.arange(self.n, self.n + new.shape[0], dtype=np.int32)
        held = 0 if self._table is None else self._table.shape[0]
        if held and lo == self._offset and int(new[0]) - lo >= held:
            tail = np.full(hi - lo + 1 - held, -1, np.int32)
            tail[new - lo - held] = ids
            table, room = grow(np, self._table, tail, self._room)
        else:
            room = None
            table = roomy(np, (hi - lo + 1,), np.int32)
            if held:
                tasks = min(cores(), 1 + table.shape[0] // LOOKUP_TASK_KEYS)
                on_cores(table_moved_task, tasks, self._table, self._offset - lo, table)
            else:
                table.fill(-1)
                old = np.arange(self._offset, self._offset + self._count, dtype=np.int64) \
                    if self._count is not None else self._sorted
                table[old - lo] = np.arange(self.n, dtype=np.int32)
            table[new - lo] = ids
        held = self._keys if self._keys is not None else self.keys
        chunks = held.chunks if isinstance(held, pa.ChunkedArray) else [held]
        keys = pa.chunked_array(chunks + [pa.array(new, pa.int64())], pa.int64())
        return VertexIds(keys, "int", _offset=lo, _table=table, _room=room)

    def encode(self, arr: pa.Array, xp=np):
        """Ids of the keys in ``arr`` as int32; -1 for NULL and for keys not in the graph
        (an array of ``xp``, NumPy by default)."""
        keys, valid = self._host_keys(arr)
        if self.kind == "str":
            ids = np.maximum(keys, -1)
        else:
            mode, offset, size, table = self.lookup(np)
            if mode == LOOKUP_RANGE:
                j = keys - offset  # wrapped (negative) below the range: masked out
                ids = np.where((keys >= offset) & (j < size), j, -1)
            elif mode == LOOKUP_DENSE:
                ids = lookup_dense(keys, offset, table)
            else:
                ids = self._search_sorted(keys)
        ids = ids.astype(np.int32, copy=False)
        if valid is not None:
            ids = np.where(valid.view(np.bool_), ids, -1).astype(np.int32)
        return xp.asarray(ids)

    def check_kind(self, typ) -> None:
        """Refuse query keys of another kind than the index's (``typ``: their Arrow type)."""
        if key_kind(typ) != self.kind:
            want = "integer" if self.kind == "int" else "string (VARCHAR)"
            raise KeyTypeError(
                f"this index has {want} vertex keys but the query keys are {typ}; "
                f"cast the query columns to the edge table's key type"
            )

    def _host_keys(self, arr: pa.Array) -> tuple[np.ndarray, np.ndarray | None]:
        """``(keys int64, valid)`` of a key column for :meth:`encode`: integer keys (those
        above 2**63 - 1 as NULL: never vertices), or the string keys' ids with ``-2 - k`` for
        the k-th distinct unknown one; ``valid`` None or one byte per row, 0 for NULL."""
        arr = one_array(arr)
        if pa.types.is_null(arr.type):
            return np.full(len(arr), -1, np.int64), np.zeros(len(arr), np.uint8)
        self.check_kind(arr.type)
        big = beyond_int64(arr) if self.kind == "int" else None
        if big is not None:
            arr = pc.if_else(pa.array(big), pa.scalar(None, arr.type), arr)
        valid = None
        if arr.null_count:
            valid = arr.is_valid().to_numpy(zero_copy_only=False).view(np.uint8)
            arr = arr.fill_null("" if self.kind == "str" else 0)
        if self.kind == "str":
            return self.codes_of_strings([arr], {}), valid
        return as_int64(arr), valid

    def lookup(self, xp=np) -> tuple[int, int, int, object]:
        """``(mode, offset, size, table)`` of the key lookup (shared LOOKUP_* codes): keys that
        are a whole range need no table (the id is ``key - offset``: one dependent load less
        per key, and no table on the device); a dense table of ids for other integer keys of
        small range, the sorted keys otherwise, nothing for strings (looked up on the host).
        ``size``: the range's keys or the table's entries; the table as an array of ``xp``,
        uploaded once."""
        if self.kind == "str":
            return LOOKUP_IDS, 0, 0, xp.empty(0, xp.int32)
        if self._count is not None:
            return LOOKUP_RANGE, self._offset, self._count, xp.empty(0, xp.int32)
        if self._table is not None:
            mode, offset, host = LOOKUP_DENSE, self._offset, self._table
        else:
            mode, offset, host = LOOKUP_SORTED, 0, self._sorted
        if xp is np:
            return mode, offset, host.shape[0], host
        table = self._device_tables.get(xp.__name__)
        if table is None:
            table = self._device_tables[xp.__name__] = xp.asarray(host)
        return mode, offset, host.shape[0], table

    def _search_sorted(self, k: np.ndarray) -> np.ndarray:
        s = self._sorted
        pos = np.searchsorted(s, k)
        pos_c = np.minimum(pos, max(s.shape[0] - 1, 0))
        hit = (pos < s.shape[0]) & (s[pos_c] == k) if s.shape[0] else np.zeros(k.shape[0], bool)
        return np.where(hit, pos, -1).astype(np.int32)

    def codes_of_strings(self, arrays, unknown: dict) -> np.ndarray:
        """The query kernels' view of string keys (Arrow string arrays, in row order): each
        key's id, or ``-2 - k`` for the k-th distinct key that is not a vertex, numbered in
        ``unknown`` (one dict for both columns of a call: equal unknown keys get equal codes).
        A NULL gets any code (its row is NULL)."""
        if self._map is None:
            self._map = {k: i for i, k in enumerate(self.keys.to_pylist())}
        get = self._map.get
        n = self.n  # the table may be shared with an appended index: its ids from n on
        out = np.empty(sum(len(a) for a in arrays), np.int64)
        i = 0
        for arr in arrays:
            for x in arr.to_pylist():
                code = get(x)
                if code is None or code >= n:
                    code = unknown.setdefault(x, -2 - len(unknown))
                out[i] = code
                i += 1
        return out

    def decode(self, ids: np.ndarray) -> pa.Array:
        """Keys of dense ids."""
        return self.keys.take(pa.array(ids))


@dataclass(frozen=True)
class Labels:
    level: object  # int32[C]: longest path from a root
    inner: object  # int32[C, d]: min post rank over the vertex and its DAG descendants
    outer: object  # int32[C, d]: max post rank over the vertex and its DAG descendants
    tree: object  # int32[C, 4]: the two spanning-tree intervals, columns TREE_COLUMNS
    hub_down: object  # uint64[C, W]: bit h set when the vertex reaches hub h
    hub_up: object  # uint64[C, W]: bit h set when hub h reaches the vertex
    #: on the GPU: the one int32 matrix of a record per component whose views the arrays but
    #: ``level`` and the windows are (:mod:`grail_duckdb.kernels.records`, made by
    #: ``Kernels.query_labels``); else None
    record: object = None
    #: uint64[C, WIN_WORDS]: the window hubs the vertex reaches, bit i = hub first[level] + i
    win_down: object = None
    #: uint64[C, WIN_WORDS]: the window hubs reaching it, bit i = hub first[level + 1] - 64 W + i
    win_up: object = None
    #: int32[levels + 1]: window hubs above each level (they are numbered by level, then id)
    win_first: object = None

    @property
    def d(self) -> int:
        return int(self.inner.shape[1])

    def arrays(self) -> dict:
        out = {"level": self.level, "inner": self.inner, "outer": self.outer,
               "tree": self.tree, "hub_down": self.hub_down, "hub_up": self.hub_up}
        if self.win_down is not None:
            out.update(win_down=self.win_down, win_up=self.win_up, win_first=self.win_first)
        return out


@dataclass
class IndexData:
    """An index's content, as the index file holds it: what a load returns and a save writes
    (the engine's :class:`~grail_duckdb.engine.index.GrailIndex` adds its backend and caches)."""

    ids: VertexIds
    comp: object  # int32[n]: component of each vertex, on the backend
    n_components: int
    dag: CSR  # the condensed DAG, over components
    labels: Labels
    seed: int
    edge_rows: int  # rows of the source edge list, duplicates and self-loops included
    fingerprint: str  # content hash of the source edges


@dataclass
class AppendBatch:
    """One batch absorbed by an index (:mod:`grail_duckdb.engine.append`): what its part file
    holds (:mod:`grail_duckdb.indexfile.appends`) and what applying it adds to an index.

    ``keys``: the new vertices' keys (sorted; their ids follow :meth:`VertexIds.appended`);
    ``comp``: their components (ids from the index's count of components on); ``dag``: the
    new components' rows of children (component ids of the grown index); ``labels``: their
    labels (no window table; None for a batch read from a part, whose labels are folded
    again where it is applied); ``rows``: the batch's edge rows; ``before`` /
    ``fingerprint``: the index's fingerprint before and after it. A batch that is written
    (or was read) keeps its counts alone (:meth:`slim`)."""

    keys: object
    comp: object
    dag: object
    labels: object
    rows: int
    before: str
    fingerprint: str
    vertices: int = -1
    components: int = -1
    dag_edges: int = -1

    def __post_init__(self):
        if self.keys is not None:
            self.vertices, self.components, self.dag_edges = (len(self.keys), self.dag.n,
                                                              self.dag.m)

    def slim(self) -> "AppendBatch":
        """The batch's counts and fingerprints, without its arrays."""
        return replace(self, keys=None, comp=None, dag=None, labels=None)

    def on(self, xp, labels: bool = True) -> "AppendBatch":
        """The same batch with its arrays in ``xp`` (NumPy or CuPy); without ``labels``, its
        graph alone (what a part holds)."""
        from .kernels import to_host

        move = to_host if xp is np else xp.asarray
        lab = None
        if labels and self.labels is not None:
            lab = Labels(**{name: move(a) for name, a in self.labels.arrays().items()
                            if a is not None})
        return replace(self, comp=move(self.comp),
                       dag=CSR(move(self.dag.indptr), move(self.dag.indices)), labels=lab)
