"""The index file's format: its version, its columns and their encodings, and every metadata
key, defined here and nowhere else (docs/index-format.md describes the file; :mod:`.writer`
and :mod:`.reader` write and read it)."""
from __future__ import annotations

import base64
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

from ..errors import IndexFileError

FORMAT_NAME = "grail_duckdb-index"
FORMAT_VERSION = 9
#: prefix of the index's keys in the file's key-value metadata
META_PREFIX = "grail_duckdb."
#: How each column is stored (docs/index-format.md gives the reasons): the GRAIL intervals,
#: the trees' post ranks and sizes and the levels BYTE_STREAM_SPLIT + LZ4; hub bits as a
#: dictionary + LZ4 where pyarrow encodes them (a GPU index's save encodes every label column
#: on the device, :mod:`.label_pages`, the hub bits plain + LZ4); sorted keys and component ids
#: DELTA_BINARY_PACKED; the window hubs' bits LZ4; the children plain.
_SPLIT_LZ4 = ("inner_", "outer_", "tree_post", "rtree_post", "tree_size", "rtree_size", "level")
_DICTIONARY_LZ4 = ("hub_",)
#: the window hubs' bits: LZ4 alone (their words differ from component to component)
_LZ4 = ("win_",)
_DELTA = ("component",)
#: the file's columns of the two spanning trees: (size column, post column, the ``tree``
#: matrix's lo and post columns: shared.TREE_COLUMNS)
TREE_FILE_COLUMNS = (("tree_size", "tree_post", 0, 1), ("rtree_size", "rtree_post", 2, 3))
#: zstd's level for string keys: its fastest
ZSTD_LEVEL = 1
#: rows per data page, at most: pages are cut at pyarrow's 1 MiB instead (its own cap of
#: 20,000 rows makes 13 times as many page headers for a load to read)
PAGE_ROWS = 1 << 20


def label_names(d: int, hub_words: int, win_words: int) -> list[str]:
    """The per-component columns, in file order: first those known once the intervals are
    (:func:`early_count`), then the hub bits."""
    return (["level"] + [c for size, post, *_ in TREE_FILE_COLUMNS for c in (size, post)]
            + [f"{side}_{j + 1}" for j in range(d) for side in ("inner", "outer")]
            + [f"hub_{side}_{w + 1}" for w in range(hub_words) for side in ("down", "up")]
            + [f"win_{side}_{w + 1}" for w in range(win_words) for side in ("down", "up")])


#: the label arrays known once the GRAIL intervals are (pass 4), before the hub passes
EARLY_FIELDS = ("level", "tree", "inner", "outer")


def early_count(d: int) -> int:
    """How many of the file's first columns are known once the intervals are: the key, the
    component, the level, the two trees' columns and the d intervals' (their chunks are
    written in a region of their own during the hub passes: :mod:`.writer`).

    >>> early_count(2), label_names(2, 1, 0)[early_count(2) - 2]
    (11, 'hub_down_1')
    """
    return 2 + len(label_names(d, 0, 0))


def first_text(first) -> str:
    """The window hubs' table of levels (int32) as the metadata stores it: little-endian
    bytes in base64 (:func:`first_array` undoes it).

    >>> first_array(first_text(np.array([0, 2, 5], np.int32))).tolist()
    [0, 2, 5]
    """
    return base64.b64encode(np.ascontiguousarray(first, "<i4").tobytes()).decode("ascii")


def first_array(text: str) -> np.ndarray:
    """The window hubs' table of levels back from :func:`first_text`."""
    return np.frombuffer(base64.b64decode(text.encode("ascii")), "<i4").astype(np.int32)


def tree_size(post: np.ndarray, lo: np.ndarray) -> np.ndarray:
    """The spanning-tree subtree sizes that the file stores for the intervals ``[lo, post]``
    (and :func:`tree_lo` undoes)."""
    return (post - lo + 1).astype(np.int32, copy=False)


def tree_lo(post: np.ndarray, size: np.ndarray) -> np.ndarray:
    """The first post ranks of the subtrees back from the file's sizes."""
    return (post - size + 1).astype(np.int32, copy=False)


def write_options(names: list[str], key_kind: str, rows: int = 1) -> dict:
    """pyarrow writer options of the index's columns (see the constants above) for a row group
    of ``rows`` rows (an empty one gets no dictionaries: pyarrow would write their pages, and
    an empty row group holds no bytes that a reader hashes)."""
    delta = [n for n in names if n.startswith(_DELTA)] + (["key"] if key_kind == "int" else [])
    dictionary = [n for n in names if n.startswith(_DICTIONARY_LZ4)] if rows else []
    split = [n for n in names if n.startswith(_SPLIT_LZ4)]
    compression = {n: "lz4" if n in dictionary or n in split or n.startswith(_LZ4) else "none"
                   for n in names}
    if key_kind == "str":
        compression["key"] = "zstd"
    encoding = {**{n: "DELTA_BINARY_PACKED" for n in delta},
                **{n: "BYTE_STREAM_SPLIT" for n in split}}
    return dict(compression=compression, compression_level={"key": ZSTD_LEVEL} if key_kind == "str"
                else None, column_encoding=encoding, use_dictionary=dictionary,
                write_statistics=False, max_rows_per_page=PAGE_ROWS)


def blobs(arr: pa.Array) -> tuple[np.ndarray, np.ndarray]:
    """A BLOB column's values: their byte offsets from 0 (64-bit) and their bytes."""
    wide = pa.types.is_large_binary(arr.type)
    offs = np.frombuffer(arr.buffers()[1], np.int64 if wide else np.int32)
    offs = offs[arr.offset:arr.offset + len(arr) + 1].astype(np.int64)
    if not len(arr) or offs[-1] == offs[0]:
        return offs - (offs[0] if len(offs) else 0), np.zeros(0, np.uint8)
    data = np.frombuffer(arr.buffers()[2], np.uint8)[offs[0]:offs[-1]]
    return offs - offs[0], data


# --- metadata: every key of the file's key-value metadata, here and nowhere else -------
#: the metadata keys (each stored with :data:`META_PREFIX` before it)
K_FORMAT, K_VERSION, K_LABELS, K_SEED = "format", "version", "labels", "seed"
K_FINGERPRINT, K_EDGE_ROWS, K_VERTICES = "fingerprint", "edge_rows", "vertices"
K_COMPONENTS, K_DAG_EDGES, K_KEY_TYPE = "components", "dag_edges", "key_type"
K_HUB_WORDS, K_WIN_WORDS, K_WIN_FIRST = "hub_words", "win_words", "win_first"
K_GROUP_EDGES, K_DIGEST = "group_edges", "digest"
#: the part files of appended batches (:mod:`.appends`): their format's name and version,
#: and their keys beside the index's (``vertices``, ``components``, ``dag_edges``,
#: ``key_type``, ``digest``, ``source.*``; format 2 also ``labels``, ``hub_words``,
#: ``win_words``): the part's number from 1, the index's fingerprint before and after it,
#: its edge rows
APPEND_FORMAT_NAME = "grail_duckdb-append"
APPEND_FORMAT_VERSION = 3
K_PART, K_BEFORE, K_AFTER, K_BATCH_ROWS = "part", "before", "after", "batch_rows"
#: where the caller's description of the source edges goes: ``source.<key>``
SOURCE_PREFIX = "source."
#: the full key that names the format (a file of this project is recognised by it)
FORMAT_META_KEY = META_PREFIX + K_FORMAT
#: the full key of the digest: the footer's last key-value pair
DIGEST_META_KEY = META_PREFIX + K_DIGEST


@dataclass(frozen=True)
class IndexMeta:
    """An index file's metadata, parsed (:func:`read_metadata`); ``source`` is what the
    writer's caller said about the edges (the SQL plugin: the table, its columns, its check)."""

    version: int
    labels: int
    seed: int
    fingerprint: str
    edge_rows: int
    vertices: int
    components: int
    dag_edges: int
    key_type: str
    hub_words: int
    win_words: int
    win_first: str | None
    group_edges: tuple[int, ...]
    digest: str
    source: dict[str, str]

    @classmethod
    def parse(cls, meta: dict[str, str]) -> "IndexMeta":
        """The fields of a file's metadata (keys without :data:`META_PREFIX`); a missing or
        malformed field raises ValueError."""
        try:
            return cls(
                version=int(meta[K_VERSION]), labels=int(meta[K_LABELS]),
                seed=int(meta[K_SEED]), fingerprint=meta[K_FINGERPRINT],
                edge_rows=int(meta[K_EDGE_ROWS]), vertices=int(meta[K_VERTICES]),
                components=int(meta[K_COMPONENTS]), dag_edges=int(meta[K_DAG_EDGES]),
                key_type=meta[K_KEY_TYPE], hub_words=int(meta[K_HUB_WORDS]),
                win_words=int(meta[K_WIN_WORDS]), win_first=meta.get(K_WIN_FIRST),
                group_edges=tuple(int(e) for e in meta.get(K_GROUP_EDGES, "").split(",") if e),
                digest=meta.get(K_DIGEST, ""),
                source={k[len(SOURCE_PREFIX):]: v for k, v in meta.items()
                        if k.startswith(SOURCE_PREFIX)})
        except (KeyError, ValueError) as exc:
            raise ValueError(f"malformed index metadata ({exc})") from None


def metadata(index, dag_edges: int, source: dict | None = None,
             win_first: str | None = None) -> dict[str, str]:
    """The metadata of ``index`` (an :class:`~grail_duckdb.model.IndexData` or an engine
    index) as full keys, but the group edges and the digest (the writer adds them once the
    row groups are laid out); ``source`` (str -> str) goes under :data:`SOURCE_PREFIX`,
    ``win_first`` is the window hubs' table of levels (:func:`first_text`)."""
    lab = index.labels
    meta = {
        K_FORMAT: FORMAT_NAME, K_VERSION: str(FORMAT_VERSION), K_LABELS: str(lab.d),
        K_SEED: str(index.seed), K_FINGERPRINT: index.fingerprint,
        K_EDGE_ROWS: str(index.edge_rows), K_VERTICES: str(index.ids.n),
        K_COMPONENTS: str(index.n_components), K_DAG_EDGES: str(dag_edges),
        K_KEY_TYPE: index.ids.kind, K_HUB_WORDS: str(lab.hub_down.shape[1]),
        K_WIN_WORDS: str(0 if lab.win_down is None else lab.win_down.shape[1]),
    }
    if win_first is not None:
        meta[K_WIN_FIRST] = win_first
    meta.update({f"{SOURCE_PREFIX}{k}": str(v) for k, v in (source or {}).items()})
    return {META_PREFIX + k: v for k, v in meta.items()}


def with_group_edges(meta: dict[str, str], edges: list[int]) -> dict[str, str]:
    """``meta`` with the row groups' DAG edges (so that a reader places every group's
    children at once) and the digest's placeholder, last (:mod:`.digest` finds it there)."""
    from .digest import DIGEST_PLACEHOLDER

    return {**meta, META_PREFIX + K_GROUP_EDGES: ",".join(str(e) for e in edges),
            DIGEST_META_KEY: DIGEST_PLACEHOLDER}


def read_metadata(path) -> IndexMeta:
    """The index file's metadata without reading its data; raises :class:`IndexFileError`
    for anything that is not an index file this version reads (naming the version found and
    the one read)."""
    path = Path(path)
    if not path.exists():
        raise IndexFileError(f"no index file at {path}; build one first (grail_duckdb.build_index "
                             "or SELECT grail_index(...) in SQL)")
    try:
        raw = pq.read_schema(path).metadata or {}
    except Exception as exc:  # pyarrow raises several types for damaged files
        if path.name.endswith(".grail.parquet"):  # named as the project names its indices
            raise IndexFileError(f"{path} is not a readable Parquet file (truncated or corrupt: "
                                 f"{exc}); rebuild the index (the build replaces it)") from exc
        raise IndexFileError(f"{path} is not a grail_duckdb index file (not readable as "
                             f"Parquet: {exc}); name an index file written by build or "
                             "grail_index") from exc
    meta = {k.decode()[len(META_PREFIX):]: v.decode() for k, v in raw.items()
            if k.startswith(META_PREFIX.encode())}
    if meta.get(K_FORMAT) != FORMAT_NAME:
        raise IndexFileError(f"{path} is a Parquet file but not a grail_duckdb index")
    try:
        version = int(meta.get(K_VERSION, ""))
    except ValueError:
        raise IndexFileError(f"{path} has an unreadable format version") from None
    if version > FORMAT_VERSION:
        raise IndexFileError(f"{path} was written in index format {version} by a newer "
                             f"grail_duckdb (this one reads format {FORMAT_VERSION}); upgrade "
                             "grail_duckdb or rebuild the index")
    if version < FORMAT_VERSION:
        raise IndexFileError(f"{path} was written in index format {version} by an older "
                             f"grail_duckdb (this one reads format {FORMAT_VERSION}); rebuild "
                             "the index (grail_index(..., rebuild := true) in SQL, or "
                             "python -m grail_duckdb build)")
    try:
        return IndexMeta.parse(meta)
    except ValueError as exc:
        raise IndexFileError(f"{path} is damaged: {exc}; rebuild the index") from None
