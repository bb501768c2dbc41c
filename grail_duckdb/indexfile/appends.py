"""The part files of appended batches: one small Parquet file per batch beside the index file.

An index at ``edges.grail.parquet`` that absorbed batches (:mod:`grail_duckdb.engine.append`)
keeps each as ``edges.grail.parquet.append-000001.parquet``, ``...-000002...``: the index
file itself is never rewritten by an append. A part holds its batch's new vertices (their keys
and components, one row each) and, on its first rows, the new components' children: the
batch's graph. Their labels are not written: a load folds them again from their children's
(:func:`~grail_duckdb.engine.append.with_labels`), as the absorb did; they would more than
double a part's bytes, and every byte is written, hashed and synced. Its metadata names its number, the index's fingerprint before and after it (a part
applies only to the state it was made from: a chain from the index file's fingerprint),
its counts and a digest of its values (a damaged part is refused).

Each part is written to a locked temporary beside the index and renamed into place
(:mod:`.atomic_write`): a crash leaves either no part or the whole part. A build that replaces
the index file removes its parts first, the last one first, so at any moment the files on
disk are an index and a prefix of its chain.
"""
from __future__ import annotations

import contextlib
import os
import re
import struct
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

from ..errors import IndexFileError
from ..model import CSR, AppendBatch, Labels, one_array
from . import parts
from .atomic_write import Replacement
from .digest import hash_bytes
from .format import (APPEND_FORMAT_NAME, APPEND_FORMAT_VERSION, K_AFTER, K_BATCH_ROWS,
                     K_BEFORE, K_COMPONENTS, K_DAG_EDGES, K_DIGEST, K_FORMAT, K_HUB_WORDS,
                     K_KEY_TYPE, K_LABELS, K_PART, K_VERSION, K_VERTICES, K_WIN_WORDS,
                     META_PREFIX, SOURCE_PREFIX)

#: the part formats this version reads (2: with the labels, as records; 3: without them)
READ_VERSIONS = (2, APPEND_FORMAT_VERSION)

__all__ = ["Part", "part_path", "parts_of", "read_parts", "remove_parts", "write_part"]

_PART = re.compile(r"\.append-(\d{6})\.parquet$")
#: the hub words that reach an appended component: none (no hub is appended), so a part of
#: format 2 holds none and a load makes them again as zeros of their twin's shape
_ZERO = {"hub_up": "hub_down", "win_up": "win_down"}


def part_path(index_path, number: int) -> Path:
    """The file of part ``number`` (from 1) of the index at ``index_path``.

    >>> part_path("/d/e.grail.parquet", 3).name
    'e.grail.parquet.append-000003.parquet'
    """
    p = Path(index_path)
    return p.with_name(f"{p.name}.append-{number:06d}.parquet")


def parts_of(index_path) -> list[tuple[int, Path]]:
    """``(number, path)`` of the part files beside the index at ``index_path``, in order."""
    p = Path(index_path)
    out = []
    with contextlib.suppress(OSError):
        for entry in os.scandir(p.parent):
            if entry.name.startswith(p.name + ".append-"):
                m = _PART.search(entry.name)
                if m and entry.name == part_path(p, int(m.group(1))).name:
                    out.append((int(m.group(1)), Path(entry.path)))
    return sorted(out)


class Part:
    """A part file's metadata (its values are read by :func:`read_parts`)."""

    def __init__(self, path: Path):
        self.path = path
        try:
            raw = pq.read_metadata(path).metadata or {}  # the file's key-value pairs
        except Exception as exc:  # pyarrow raises several types for damaged files
            raise IndexFileError(f"{path} is not a readable part of an index ({exc}); delete "
                                 "it and the parts after it, or rebuild the index") from exc
        meta = {k.decode()[len(META_PREFIX):]: v.decode() for k, v in raw.items()
                if k.startswith(META_PREFIX.encode())}
        if meta.get(K_FORMAT) != APPEND_FORMAT_NAME:
            raise IndexFileError(f"{path} is not a part of a grail_duckdb index")
        if int(meta.get(K_VERSION, 0)) not in READ_VERSIONS:
            raise IndexFileError(f"{path} is a part in format {meta.get(K_VERSION)}; this "
                                 f"grail_duckdb reads formats {READ_VERSIONS[0]} to "
                                 f"{READ_VERSIONS[-1]}: rebuild the index")
        self.version = int(meta[K_VERSION])
        self.meta = meta
        self.number = int(meta[K_PART])
        self.before, self.after = meta[K_BEFORE], meta[K_AFTER]
        self.rows = int(meta[K_BATCH_ROWS])
        self.source = {k[len(SOURCE_PREFIX):]: v for k, v in meta.items()
                       if k.startswith(SOURCE_PREFIX)}


def write_part(index_path, number: int, batch: AppendBatch, key_kind: str,
               source: dict | None = None, fsync: bool = True) -> Path:
    """Write ``batch`` (host arrays) as part ``number`` of the index at ``index_path``,
    atomically; ``source`` (str -> str) is kept as ``source.*`` (:attr:`Part.source`).

    The children's page is written from their array as it lies (:func:`_write_body`),
    beside the few columns pyarrow encodes, while another thread hashes the values for the
    digest (which the footer, written last, holds)."""
    table = _table(batch)
    with ThreadPoolExecutor(1) as pool:
        digest = pool.submit(_digest, table)
        meta = {K_FORMAT: APPEND_FORMAT_NAME, K_VERSION: str(APPEND_FORMAT_VERSION),
                K_PART: str(number), K_BEFORE: batch.before, K_AFTER: batch.fingerprint,
                K_BATCH_ROWS: str(batch.rows), K_VERTICES: str(batch.vertices),
                K_COMPONENTS: str(batch.components), K_DAG_EDGES: str(batch.dag_edges),
                K_KEY_TYPE: key_kind}
        meta.update({f"{SOURCE_PREFIX}{k}": str(v) for k, v in (source or {}).items()})
        out = Replacement(part_path(index_path, number), APPEND_FORMAT_NAME)
        try:
            tail = _write_body(out.fd, table)
            meta[K_DIGEST] = digest.result()
            _write_all(out.fd, tail({META_PREFIX + k: v for k, v in meta.items()}))
            return out.commit(fsync=fsync)
        except BaseException:
            out.discard()
            raise


def _write_body(fd: int, table: pa.Table):
    """Write the part's bytes up to its footer at the descriptor: ``PAR1``, the children's
    page (:func:`.parts.write_blob_page`'s layout, its words written from where they lie),
    then the other columns' chunks (pyarrow's, plain and uncompressed: keys and ranks
    barely shrink, at twice the time); returns ``footer(metadata) -> bytes``, the footer
    with the given key-value metadata. The schema is Parquet's alone: the part reads back
    with 32-bit offsets (binary, string), which :func:`_digest` hashes as the 64-bit ones
    written."""
    rows = table.num_rows
    stand_in = table.set_column(table.num_columns - 1, "dag_children",
                                pa.nulls(rows, pa.large_binary()))
    part = parts.encode_part(stand_in, compression="none", use_dictionary=False,
                             write_statistics=False)
    start, page = len(parts.MAGIC), []
    if rows:
        blob = table.column("dag_children").chunk(0)
        offsets = np.frombuffer(blob.buffers()[1], np.int64, 2, 8 * blob.offset)
        words = np.frombuffer(blob.buffers()[2], np.uint8)[offsets[0]:offsets[1]]
        valid = np.zeros(rows, np.bool_)
        valid[0] = True
        head = parts.blob_head("dag_children", rows, valid, 1, words.shape[0] // 4)
        page = [head + struct.pack("<I", words.shape[0]), words]
    size = sum(len(b) for b in page)
    if rows:
        parts.external_chunk(part, stand_in, start, size)
    _write_all(fd, parts.MAGIC)
    for buf in page:
        _write_all(fd, buf)
    _write_all(fd, memoryview(part.data)[len(parts.MAGIC):part.data_end])
    return lambda metadata: parts.footer([part], metadata, start=start + size)


def _write_all(fd: int, data) -> None:
    """All of ``data`` written at the descriptor's position."""
    view = memoryview(data)
    while view:
        view = view[os.write(fd, view):]


def read_parts(index_path, fingerprint: str) -> list[tuple[Part, AppendBatch]]:
    """The parts of the index at ``index_path`` that chain from ``fingerprint`` (the index
    file's), in order, with their batches (host arrays). The chain stops at the first part
    that does not continue it (one left from another history of the file: it is ignored);
    a part that does but is damaged is refused with :class:`IndexFileError`."""
    out = []
    for number, path in parts_of(index_path):
        if number != len(out) + 1:
            break
        part = Part(path)
        if part.before != fingerprint or part.number != number:
            break
        out.append((part, _batch(part)))
        fingerprint = part.after
    return out


def remove_parts(index_path, after: int = 0) -> None:
    """Delete the parts of the index at ``index_path`` numbered above ``after``, the last
    first (what remains is always a prefix of the chain)."""
    for number, path in reversed(parts_of(index_path)):
        if number > after:
            with contextlib.suppress(FileNotFoundError):
                os.unlink(path)


def record(d: int, hub_words: int, win_words: int) -> np.dtype:
    """The record of a new component in a part of format 2 (little-endian, packed): its
    level, GRAIL intervals, spanning-tree intervals, hub and window words it reaches, and
    where its children end in ``dag_children``.

    >>> record(3, 2, 2).itemsize
    84
    """
    fields = [("level", "<i4"), ("inner", "<i4", (d,)), ("outer", "<i4", (d,)),
              ("tree", "<i4", (4,)), ("hub_down", "<u8", (hub_words,))]
    if win_words:
        fields.append(("win_down", "<u8", (win_words,)))
    return np.dtype(fields + [("dag_end", "<i8")])


def _table(batch: AppendBatch) -> pa.Table:
    """The part's columns: per new vertex its key and component; per new component (the
    first rows; the last end repeated after them) where its children end in
    ``dag_children``, which holds them all in one BLOB on the first row (a list column costs
    a repetition level per child)."""
    k, n = batch.vertices, batch.components
    ptr = np.asarray(batch.dag.indptr, np.int64)
    ends = np.empty(k, np.int64)
    ends[:n] = ptr[1:] - ptr[0]
    ends[n:] = ptr[-1] - ptr[0]
    return pa.table({"key": batch.keys, "component": pa.array(np.asarray(batch.comp, np.int32)),
                     "dag_end": pa.array(ends),
                     "dag_children": _blob(np.asarray(batch.dag.indices, "<i4"), k)})


def _blob(children: np.ndarray, rows: int) -> pa.Array:
    """``rows`` BLOBs: ``children``'s bytes on the first, NULL after it (none for no rows).

    >>> _blob(np.array([1, 2], "<i4"), 3).to_pylist()
    [b'\\x01\\x00\\x00\\x00\\x02\\x00\\x00\\x00', None, None]
    """
    if rows == 0:
        if children.shape[0]:
            raise ValueError("children in a part of no rows")
        return pa.array([], pa.large_binary())
    offsets = np.full(rows + 1, children.nbytes, np.int64)
    offsets[0] = 0
    valid = np.zeros(rows, np.bool_)
    valid[0] = True
    return pa.LargeBinaryArray.from_buffers(
        pa.large_binary(), rows, [pa.py_buffer(np.packbits(valid, bitorder="little")),
                                  pa.py_buffer(offsets), pa.py_buffer(children)], rows - 1)


def _digest(table: pa.Table) -> str:
    """A hash of the part's values (:func:`.digest.hash_bytes` of each column's values as
    they decode, whatever their encoding in the file)."""
    leaves = []
    for col in table.columns:
        arr = one_array(col)
        if _variable(arr.type):  # 32- or 64-bit offsets, hashed as 64-bit ones
            wide = pa.types.is_large_binary(arr.type) or pa.types.is_large_string(arr.type)
            offs = np.frombuffer(arr.buffers()[1], np.int64 if wide else np.int32)[
                arr.offset:arr.offset + len(arr) + 1].astype(np.int64)
            data = np.frombuffer(arr.buffers()[2], np.uint8)[offs[0]:offs[-1]] if len(arr) else b""
            leaves += [hash_bytes(offs - offs[0]), hash_bytes(np.ascontiguousarray(data))]
        elif pa.types.is_fixed_size_binary(arr.type):
            width = arr.type.byte_width
            data = np.frombuffer(arr.buffers()[1], np.uint8)
            leaves.append(hash_bytes(data[arr.offset * width:(arr.offset + len(arr)) * width]))
        else:
            leaves.append(hash_bytes(np.ascontiguousarray(arr.to_numpy())))
    return hash_bytes(b"".join(leaves)).hex()


def _variable(typ: pa.DataType) -> bool:
    """Whether values of ``typ`` are bytes of varying lengths (strings, BLOBs)."""
    return (pa.types.is_binary(typ) or pa.types.is_large_binary(typ) or pa.types.is_string(typ)
            or pa.types.is_large_string(typ))


def _batch(part: Part) -> AppendBatch:
    """The batch of a part (host arrays), its digest checked."""
    try:
        table = pq.read_table(part.path)
        if _digest(table) != part.meta[K_DIGEST]:
            raise ValueError("content digest mismatch")
        n = int(part.meta[K_COMPONENTS])
        col = {name: table.column(name).combine_chunks() for name in table.column_names}
        ptr = np.zeros(n + 1, np.int64)
        lab = None
        if part.version == 2:
            ptr[1:], lab = _labels_v2(part, col["labels"], n)
        else:
            ptr[1:] = col["dag_end"].to_numpy()[:n]
        blob = col["dag_children"]
        idx = (np.frombuffer(blob[0].as_py(), "<i4").astype(np.int32) if len(blob)
               else np.empty(0, np.int32))
        batch = AppendBatch(col["key"], col["component"].to_numpy().astype(np.int32),
                            CSR(ptr, idx), lab, part.rows, part.before, part.after)
    except IndexFileError:
        raise
    except Exception as exc:
        raise IndexFileError(f"{part.path} is damaged ({exc}); delete it and the parts after "
                             "it, or rebuild the index") from exc
    if (batch.vertices, batch.dag_edges) != (int(part.meta[K_VERTICES]),
                                             int(part.meta[K_DAG_EDGES])):
        raise IndexFileError(f"{part.path} is damaged (its counts differ from its metadata); "
                             "delete it and the parts after it, or rebuild the index")
    return batch


def _labels_v2(part: Part, labels: pa.Array, n: int) -> tuple[np.ndarray, Labels]:
    """``(dag_end, labels)`` of the records of a part of format 2 (:func:`record`)."""
    kind = record(int(part.meta[K_LABELS]), int(part.meta[K_HUB_WORDS]),
                  int(part.meta[K_WIN_WORDS]))
    if labels.type.byte_width != kind.itemsize:
        raise ValueError(f"records of {labels.type.byte_width} bytes, not {kind.itemsize}")
    rec = np.frombuffer(labels.buffers()[1], kind, len(labels),
                        labels.offset * kind.itemsize)[:n]
    lab = {name: np.ascontiguousarray(rec[name]) for name in kind.names[:-1]}
    for name, twin in _ZERO.items():
        if twin in lab:
            lab[name] = np.zeros_like(lab[twin])
    return rec["dag_end"], Labels(**lab)
