"""The index file's format (9): names, metadata checks, the digest (see :mod:`.persistence`
for the layout, :mod:`.index_reader` and :func:`.persistence.save` for reading and writing)."""
from __future__ import annotations

import base64
import hashlib
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

from ..errors import IndexFileError
from ..kernels.cpu.digest import hash_bytes

FORMAT_NAME = "grail_duckdb-index"
FORMAT_VERSION = 9
#: prefix of the index's keys in the file's key-value metadata
META_PREFIX = "grail_duckdb."
#: How each column is stored (measured per column with pyarrow on a 2M-paper citation index,
#: one thread; the load decodes, the save encodes): the GRAIL intervals, the trees' post ranks
#: and sizes and the levels BYTE_STREAM_SPLIT + LZ4 (the intervals 0.6-0.7 of their bytes;
#: LZ4 alone 0.67-1.0 and twice the encoding time, zstd 0.5 at 2.5x the decoding time; the
#: sizes and levels, small numbers, 0.14-0.37 of their bytes, smaller than or as small as
#: DELTA_BINARY_PACKED's and encoded in half its time on a 4M-paper citation index and on
#: rmat:21:12; README, Scale, stop 34); hub bits as a dictionary (a few hundred distinct
#: words per row group) + LZ4, 0.06 of their bytes, decoded 2.2x faster than through zstd and
#: smaller (where pyarrow encodes them: a GPU index's save encodes every label column on the
#: device, :mod:`.label_pages`, the hub bits plain + LZ4); sorted keys and component ids
#: DELTA_BINARY_PACKED (a DAG's: 0..n-1, next to nothing); the children plain (they hardly
#: compress, and are copied straight from the file on load).
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
#: rows per data page, at most: pages are cut at pyarrow's 1 MiB instead (pyarrow's own cap,
#: 20,000 rows, made 13 times as many pages of int32, each a header that a GPU load reads
#: in Python: :mod:`.page_plan`); files as small or smaller, encoded and decoded by pyarrow
#: in the same time (a 2M-paper citation index and rmat:21:12, one thread; README, Scale,
#: stop 34)
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
    component, the level, the two trees' columns and the d intervals' (formats 8 and 9
    write their chunks in a region of their own during the hub passes: :mod:`.persistence`).

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


# --- the digest: the bytes as written, hashed where they are written and read ------------
def leaf_hash(data) -> bytes:
    """The 16-byte hash of a run of the file's bytes
    (:func:`~grail_duckdb.kernels.cpu.digest.hash_bytes`: damage, not forgery; at memory speed)."""
    return hash_bytes(data)


def group_leaf(children: bytes, early: bytes, own: bytes) -> bytes:
    """One leaf of the digest: a row group's, from the :func:`leaf_hash` of each of its
    spans (:func:`.parquet_parts.group_spans`): its children's chunk in the region at the
    front of the file, its early columns' chunks in the region after it, its own bytes (a
    span of no bytes where it has none)."""
    return hash_bytes(children + early + own)


#: the metadata key of the digest: the footer's last key-value pair
DIGEST_KEY = META_PREFIX + "digest"
#: the digest's length in the footer (hex digits) and what stands there while it is computed
_DIGEST_CHARS = 32
DIGEST_PLACEHOLDER = "0" * _DIGEST_CHARS
#: the digest's value in the footer's Thrift (compact protocol) bytes comes right after this:
#: KeyValue field 1 (binary) = the key, then field 2's header and length
_DIGEST_LEAD = (b"\x18" + bytes([len(DIGEST_KEY)]) + DIGEST_KEY.encode()
                + b"\x18" + bytes([_DIGEST_CHARS]))


def digest_site(footer: bytes) -> int:
    """Where the digest's hex digits start in the footer's bytes (``FileMetaData``, as this
    package writes it: the digest is the last key-value pair), or -1."""
    at = footer.rfind(_DIGEST_LEAD)
    return -1 if at < 0 else at + len(_DIGEST_LEAD)


def root_digest(footer: bytes, site: int, leaves: list[bytes]) -> str:
    """The file's digest: the footer's bytes as written (schema, row groups, offsets,
    encodings and all the metadata), with the digest's own digits read as
    :data:`DIGEST_PLACEHOLDER`, and the hash of each row group's column chunks. Any changed
    byte a load reads changes it; the footer is hashed as bytes, so a load does not decode
    it (about half a millisecond per row group in Python)."""
    root = hashlib.blake2b(digest_size=16)
    root.update(footer[:site])
    root.update(DIGEST_PLACEHOLDER.encode())
    root.update(footer[site + _DIGEST_CHARS:])
    for leaf in leaves:
        root.update(leaf)
    return root.hexdigest()


def blobs(arr: pa.Array) -> tuple[np.ndarray, np.ndarray]:
    """A BLOB column's values: their byte offsets from 0 (64-bit) and their bytes."""
    wide = pa.types.is_large_binary(arr.type)
    offs = np.frombuffer(arr.buffers()[1], np.int64 if wide else np.int32)
    offs = offs[arr.offset:arr.offset + len(arr) + 1].astype(np.int64)
    if not len(arr) or offs[-1] == offs[0]:
        return offs - (offs[0] if len(offs) else 0), np.zeros(0, np.uint8)
    data = np.frombuffer(arr.buffers()[2], np.uint8)[offs[0]:offs[-1]]
    return offs - offs[0], data


# --- metadata -----------------------------------------------------------------------------
def read_metadata(path) -> dict[str, str]:
    """The index file's metadata (format, version, labels, fingerprint, counts) without reading
    its data; raises :class:`IndexFileError` for anything that is not a current index file."""
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
    if meta.get("format") != FORMAT_NAME:
        raise IndexFileError(f"{path} is a Parquet file but not a grail_duckdb index")
    try:
        version = int(meta.get("version", ""))
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
    return meta
