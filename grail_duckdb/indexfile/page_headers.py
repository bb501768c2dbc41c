"""Parquet page headers walked without the interpreter's lock (a load's row groups, on
every core): Thrift's compact protocol in Numba, for the index file's label pages
(:mod:`.page_plan`), and a row group's DAG rows made from its children's column.
"""
from __future__ import annotations

import numpy as np

from ..jit import njit
from ..kernels.shared import (PAGE_COLUMNS, PAGE_FLAGS, PAGE_LEN, PAGE_LZ4, PAGE_RAW, PAGE_ROW,
                              PAGE_ROWS, PAGE_SCRATCH, PAGE_SPLIT, PAGE_SRC, PAGE_WIDTH)
from .thrift import (PLAIN_ENCODING, SPLIT_ENCODING, T_BINARY, T_BYTE, T_DOUBLE, T_FALSE, T_I16,
                     T_I32, T_I64, T_LIST, T_MAP, T_SET, T_STRUCT, T_TRUE)

#: nested structs and lists a header may hold, at most, before it is taken as damaged
_MAX_DEPTH = 16


@njit(cache=True, nogil=True, boundscheck=True)
def _uvarint(buf, pos):
    """An unsigned varint at ``pos``: ``(value, position after it)``, position -1 where it
    does not decode."""
    value, shift = 0, 0
    while pos < buf.shape[0] and shift < 64:
        b = np.int64(buf[pos])
        pos += 1
        value |= (b & 0x7F) << shift
        if b < 0x80:
            return value, pos
        shift += 7
    return 0, -1


@njit(cache=True, nogil=True, boundscheck=True)
def _field(buf, pos, last):
    """The header of a struct's field at ``pos``, the field before it ``last``: ``(its id,
    its type, the position after it)``; type 0 at the struct's end, position -1 where it
    does not decode."""
    if pos < 0 or pos >= buf.shape[0]:
        return 0, 0, -1
    head = np.int64(buf[pos])
    pos += 1
    if head == 0 or head >> 4:
        return last + (head >> 4), head & 0x0F, pos
    raw, pos = _uvarint(buf, pos)  # the field id in a varint of its own
    return (raw >> 1) ^ -(raw & 1), head & 0x0F, pos


@njit(cache=True, nogil=True, boundscheck=True)
def _integer(buf, pos, typ):
    """An integer field's value at ``pos`` (a zigzag varint): ``(value, position after it)``,
    position -1 where ``typ`` is not an integer's type or it does not decode."""
    if typ != T_I16 and typ != T_I32 and typ != T_I64:
        return 0, -1
    raw, pos = _uvarint(buf, pos)
    return (raw >> 1) ^ -(raw & 1), pos


@njit(cache=True, nogil=True, boundscheck=True)
def _skip(buf, pos, typ):
    """The position after a value of compact type ``typ`` at ``pos`` (a struct field's
    booleans are in their type: none to skip), or -1 where it does not decode: the structs,
    lists and maps it holds are walked with a stack of their own, at most
    :data:`_MAX_DEPTH` deep."""
    kind = np.zeros(_MAX_DEPTH, np.int64)  # 0: a struct, 1: a list or set, 2: a map
    left = np.zeros(_MAX_DEPTH, np.int64)  # values still to skip (a map's keys and values)
    first = np.zeros(_MAX_DEPTH, np.int64)  # the elements' type (a map's keys')
    second = np.zeros(_MAX_DEPTH, np.int64)  # a map's values' type
    depth, boxed, end = 0, False, buf.shape[0]
    while True:
        if pos < 0 or pos > end:
            return -1
        opened = -1
        if typ == T_TRUE or typ == T_FALSE:
            pos += 1 if boxed else 0  # a boolean in a list or map takes a byte
        elif typ == T_BYTE:
            pos += 1
        elif typ == T_I16 or typ == T_I32 or typ == T_I64:
            pos = _uvarint(buf, pos)[1]
        elif typ == T_DOUBLE:
            pos += 8
        elif typ == T_BINARY:
            n, pos = _uvarint(buf, pos)
            pos = pos + n if pos >= 0 and n >= 0 else -1
        elif (typ == T_LIST or typ == T_SET) and pos < end:
            head = np.int64(buf[pos])
            size, pos = head >> 4, pos + 1
            if size == 15:
                size, pos = _uvarint(buf, pos)
            opened, a, b = 1, head & 0x0F, 0
        elif typ == T_MAP:
            size, pos = _uvarint(buf, pos)
            a = b = 0
            if size and 0 <= pos < end:
                a, b = np.int64(buf[pos]) >> 4, np.int64(buf[pos]) & 0x0F
                pos += 1
            opened, size = 2, 2 * size
        elif typ == T_STRUCT:
            opened, size, a, b = 0, 0, 0, 0
        else:
            return -1
        if pos < 0 or pos > end:
            return -1
        if opened >= 0:
            if depth == _MAX_DEPTH or size < 0:
                return -1
            kind[depth], left[depth], first[depth], second[depth] = opened, size, a, b
            depth += 1
        while True:  # the next value to skip: the innermost open value's next one
            if depth == 0:
                return pos
            d = depth - 1
            if kind[d] == 0:
                _, typ, pos = _field(buf, pos, 0)
                if pos < 0:
                    return -1
                if typ == 0:
                    depth -= 1
                    continue
                boxed = False
                break
            if left[d] == 0:
                depth -= 1
                continue
            left[d] -= 1
            typ = first[d] if kind[d] == 1 or left[d] % 2 == 1 else second[d]
            boxed = True
            break


@njit(cache=True, nogil=True, boundscheck=True)
def _header(buf, pos, out):
    """The page header at ``pos``: its type, uncompressed and compressed sizes (fields 1-3)
    and its data page header's values and encoding (field 5's fields 1 and 2) into ``out``;
    returns where the page's bytes start, or -1 for a header without all of them or that
    does not decode."""
    have, last = 0, 0
    while True:
        last, typ, pos = _field(buf, pos, last)
        if pos < 0:
            return -1
        if typ == 0:
            return pos if have == 0b11111 else -1
        if 1 <= last <= 3 and typ != T_STRUCT:
            out[last - 1], pos = _integer(buf, pos, typ)
            have |= 1 << (last - 1)
        elif last == 5 and typ == T_STRUCT:
            inner = 0
            while pos >= 0:
                inner, t, pos = _field(buf, pos, inner)
                if t == 0:
                    break
                if inner == 1 or inner == 2:
                    out[2 + inner], pos = _integer(buf, pos, t)
                    have |= 1 << (2 + inner)
                else:
                    pos = _skip(buf, pos, t)
        else:
            pos = _skip(buf, pos, typ)


@njit(cache=True, nogil=True, boundscheck=True)
def page_table(buf, start, stop, width, lz4, rows):
    """The pages of the column chunk ``buf[start:stop]`` (``buf``: the whole file) as a
    table of :data:`PAGE_COLUMNS` (sources from ``start``, scratch from 0, no destination),
    if every page is a version-1 data page of ``width``-byte values, PLAIN or
    byte-stream-split, as stored (``lz4`` False) or one LZ4 block each, and the pages hold
    ``rows`` values; else a table of shape ``(0, 0)``: the chunk is left to pyarrow. Page
    headers are read here rather than in Python, so that thousands of them do not hold the
    interpreter's lock."""
    out = np.zeros((16, PAGE_COLUMNS), np.int64)
    head = np.zeros(5, np.int64)
    pos, row, scratch, n = start, 0, 0, 0
    while pos < stop:
        body = _header(buf, pos, head)
        kind, raw, size, values, encoding = head[0], head[1], head[2], head[3], head[4]
        if encoding == SPLIT_ENCODING:
            flags = PAGE_SPLIT
        elif encoding == PLAIN_ENCODING:
            flags = 0
        else:
            flags = -1
        if (body < 0 or kind != 0 or flags < 0 or size < 0 or values < 0
                or raw != values * width or body + size > stop or (not lz4 and size != raw)):
            return np.zeros((0, 0), np.int64)
        if n == out.shape[0]:
            grown = np.zeros((2 * n, PAGE_COLUMNS), np.int64)
            grown[:n] = out
            out = grown
        out[n, PAGE_SRC] = body - start
        out[n, PAGE_LEN] = size
        out[n, PAGE_RAW] = raw
        out[n, PAGE_SCRATCH] = scratch if lz4 else -1
        out[n, PAGE_ROW] = row
        out[n, PAGE_ROWS] = values
        out[n, PAGE_WIDTH] = width
        out[n, PAGE_FLAGS] = flags | (PAGE_LZ4 if lz4 else 0)
        n += 1
        scratch += raw if lz4 else 0
        row += values
        pos = body + size
    if row != rows:
        return np.zeros((0, 0), np.int64)
    return out[:n].copy()


@njit(cache=True, nogil=True, boundscheck=False)
def children_rows(bitmap, bit0, offsets, comp, ptr, e0):
    """A row group's DAG rows from its children's column, in one pass without the
    interpreter's lock (a load's row group, on every core): the rows whose children are
    not NULL (bit ``bit0 + i`` of the validity ``bitmap``; every row where it is empty)
    are the representatives of consecutive components ``c0, c0 + 1, ...``; each one's
    children's count (its BLOB's bytes, ``offsets``, over 4) ends its component's row
    pointer, ``ptr[c + 1] = e0 + the children so far``. Returns ``(c0, c1, ok)``: the
    components ``[c0, c1)`` the rows hold, and False where a representative's component
    does not follow the one before, a BLOB is not whole int32, or a pointer falls outside
    ``ptr`` (a damaged file).

    >>> ptr = np.zeros(4, np.int64)
    >>> bits = np.array([0b101], np.uint8)  # rows 0 and 2 hold their components' children
    >>> children_rows(bits, 0, np.array([0, 8, 8, 12]), np.array([1, 1, 2]), ptr, 5), ptr
    ((1, 3, True), array([0, 0, 7, 8]))
    """
    c0, k, total = -1, 0, 0
    for i in range(comp.shape[0]):
        if bitmap.shape[0] and not (bitmap[(bit0 + i) >> 3] >> ((bit0 + i) & 7)) & 1:
            continue
        if c0 < 0:
            c0 = np.int64(comp[i])
        length = offsets[i + 1] - offsets[i]
        if comp[i] != c0 + k or length % 4 or c0 < 0 or c0 + k + 1 >= ptr.shape[0]:
            return c0, c0 + k, False
        total += length // 4
        ptr[c0 + k + 1] = e0 + total
        k += 1
    c0 = max(c0, 0)
    return c0, c0 + k, True
