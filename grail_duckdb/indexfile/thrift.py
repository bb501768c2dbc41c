"""Thrift's compact protocol, as Parquet's footers and page headers use it.

The footer (a ``FileMetaData``) is decoded into a generic tree of ``[field id, type,
value]`` lists and encoded back (:func:`read_struct`, :func:`write_struct`), so fields this
package does not know about are kept as they are; the field ids below are parquet.thrift's,
for the fields the index file's writer moves or sets (:mod:`.parts`).

>>> out = bytearray(); write_struct(out, [[1, T_I32, -3], [4, T_BINARY, b"ab"]])
>>> read_struct(bytes(out), 0)
([[1, 5, -3], [4, 8, b'ab']], 7)
"""
from __future__ import annotations

#: the compact protocol's types
(T_TRUE, T_FALSE, T_BYTE, T_I16, T_I32, T_I64, T_DOUBLE, T_BINARY, T_LIST, T_SET, T_MAP,
 T_STRUCT) = range(1, 13)
#: Parquet's encodings a page of the index file may be in: PLAIN and BYTE_STREAM_SPLIT
PLAIN_ENCODING, SPLIT_ENCODING = 0, 9

# field ids (parquet.thrift) of the offsets that move with a part
FILE_ROW_GROUPS, FILE_NUM_ROWS, FILE_KV = 4, 3, 5
# ... and of what two parts of the same rows join (:func:`joined`)
FILE_SCHEMA, FILE_COLUMN_ORDERS, SE_NUM_CHILDREN = 2, 7, 5
RG_COLUMNS, RG_FILE_OFFSET, RG_ORDINAL = 1, 5, 7
CC_FILE_OFFSET, CC_META, CC_OFFSET_INDEX, CC_COLUMN_INDEX = 2, 3, 4, 6
CM_OFFSETS = (9, 10, 11, 14)  # data page, index page, dictionary page, bloom filter
# ... and of the sizes that a column chunk written here (Blobs) sets
RG_BYTES, RG_COMPRESSED = 2, 6
CM_UNCOMPRESSED, CM_COMPRESSED, CM_DATA_PAGE, CM_DICTIONARY_PAGE = 6, 7, 9, 11
CM_STATISTICS, CM_SIZE_STATISTICS = 12, 16
CM_PATH, CM_VALUES = 3, 5  # path_in_schema, num_values
CM_ENCODING_STATS = 13  # page counts by encoding
# page types and encodings (parquet.thrift; PLAIN_ENCODING above)
DATA_PAGE, RLE = 0, 3


class FooterError(ValueError):
    """A part's footer could not be decoded."""


# --- the compact protocol: decode into [fid, type, value] lists, encode them back ----------
def uvarint(buf: bytes, pos: int) -> tuple[int, int]:
    out = shift = 0
    while True:
        b = buf[pos]
        pos += 1
        out |= (b & 0x7F) << shift
        if b < 0x80:
            return out, pos
        shift += 7
        if shift > 70:
            raise FooterError("varint too long")


def zigzag(n: int) -> int:
    return (n >> 1) ^ -(n & 1)


def read_value(buf: bytes, pos: int, typ: int):
    if typ in (T_TRUE, T_FALSE):  # a bool inside a list or map: one byte
        return buf[pos], pos + 1
    if typ == T_BYTE:
        return buf[pos], pos + 1
    if typ in (T_I16, T_I32, T_I64):
        v, pos = uvarint(buf, pos)
        return zigzag(v), pos
    if typ == T_DOUBLE:
        return bytes(buf[pos:pos + 8]), pos + 8
    if typ == T_BINARY:
        n, pos = uvarint(buf, pos)
        return bytes(buf[pos:pos + n]), pos + n
    if typ in (T_LIST, T_SET):
        head = buf[pos]
        pos += 1
        size, elem = head >> 4, head & 0x0F
        if size == 15:
            size, pos = uvarint(buf, pos)
        items = []
        for _ in range(size):
            v, pos = read_value(buf, pos, elem)
            items.append(v)
        return (elem, items), pos
    if typ == T_MAP:
        size, pos = uvarint(buf, pos)
        kt = vt = 0
        if size:
            kt, vt = buf[pos] >> 4, buf[pos] & 0x0F
            pos += 1
        items = []
        for _ in range(size):
            k, pos = read_value(buf, pos, kt)
            v, pos = read_value(buf, pos, vt)
            items.append((k, v))
        return (kt, vt, items), pos
    if typ == T_STRUCT:
        return read_struct(buf, pos)
    raise FooterError(f"unknown Thrift type {typ}")


def read_struct(buf: bytes, pos: int) -> tuple[list, int]:
    fields, last = [], 0
    while True:
        head = buf[pos]
        pos += 1
        if head == 0:
            return fields, pos
        delta, typ = head >> 4, head & 0x0F
        if delta:
            fid = last + delta
        else:
            raw, pos = uvarint(buf, pos)
            fid = zigzag(raw)
        if typ in (T_TRUE, T_FALSE):
            value = None  # the type carries the value
        else:
            value, pos = read_value(buf, pos, typ)
        fields.append([fid, typ, value])
        last = fid


def write_uvarint(out: bytearray, n: int) -> None:
    while n >= 0x80:
        out.append((n & 0x7F) | 0x80)
        n >>= 7
    out.append(n)


def write_zigzag(out: bytearray, n: int) -> None:
    write_uvarint(out, (n << 1) ^ (n >> 63) if n < 0 else n << 1)


def write_value(out: bytearray, typ: int, value) -> None:
    if typ in (T_TRUE, T_FALSE, T_BYTE):
        out.append(value & 0xFF)
    elif typ in (T_I16, T_I32, T_I64):
        write_zigzag(out, value)
    elif typ == T_DOUBLE:
        out += value
    elif typ == T_BINARY:
        write_uvarint(out, len(value))
        out += value
    elif typ in (T_LIST, T_SET):
        elem, items = value
        if len(items) < 15:
            out.append((len(items) << 4) | elem)
        else:
            out.append(0xF0 | elem)
            write_uvarint(out, len(items))
        for v in items:
            write_value(out, elem, v)
    elif typ == T_MAP:
        kt, vt, items = value
        write_uvarint(out, len(items))
        if items:
            out.append((kt << 4) | vt)
        for k, v in items:
            write_value(out, kt, k)
            write_value(out, vt, v)
    elif typ == T_STRUCT:
        if isinstance(value, bytes):  # encoded already (:func:`moved_groups`)
            out += value
        else:
            write_struct(out, value)
    else:
        raise FooterError(f"unknown Thrift type {typ}")


def write_struct(out: bytearray, fields: list) -> None:
    last = 0
    for fid, typ, value in fields:
        if 0 < fid - last <= 15:
            out.append(((fid - last) << 4) | typ)
        else:
            out.append(typ)
            write_zigzag(out, fid)
        if typ not in (T_TRUE, T_FALSE):
            write_value(out, typ, value)
        last = fid
    out.append(0)


def field_of(fields: list, fid: int):
    return next((f for f in fields if f[0] == fid), None)


def set_field(fields: list, fid: int, typ: int, value) -> None:
    f = field_of(fields, fid)
    if f is None:
        fields.append([fid, typ, value])
        fields.sort(key=lambda f: f[0])
    else:
        f[1], f[2] = typ, value


def shift(fields: list, fid: int, delta: int) -> None:
    f = field_of(fields, fid)
    if f is not None:
        f[2] += delta


