"""Edge text -> key columns: edge lists (SNAP) and CSV/TSV, for :mod:`.readers`.

A file one delimiter parses is read by pyarrow.csv (parallel, strict integers); an edge list it
cannot read (comments further down, runs of white space, tabs and spaces mixed, mixed line
ends) by DuckDB, each line matched by a regular expression in SQL. Keys are converted by
Arrow's integer parser: DuckDB's casts would round ``4.5`` to 5. A malformed line is named.
"""
from __future__ import annotations

import csv
import gzip
import io
import re
import zlib
from pathlib import Path

import duckdb
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.csv as pacsv

from ..engine.ingest import edge_table
from ..errors import EdgeInputError

__all__ = ["read_edge_list", "read_delimited", "pick_columns", "existing", "is_gzip",
           "read_bytes", "head_lines", "INTEGER", "KEYS_META", "HEADER_META"]

#: how much of a text file is looked at to choose its header, delimiter and columns
_HEAD_BYTES = 1 << 16
_SPACE = " \t\r\x0b\x0c"
INTEGER = re.compile(r"[+-]?[0-9]+")
#: schema metadata of a CSV/TSV read: which key type was chosen and why (the first key that is
#: not an integer), and the header row taken as column names (absent: none was)
KEYS_META = b"grail.keys"
HEADER_META = b"grail.header"
#: a column whose keys are integers but for at most this share is refused (a bad cell, not
#: text keys), unless text keys are asked for
_MOSTLY_INTEGERS = 0.5


def existing(path) -> Path:
    """The path, checked to be an existing file."""
    p = Path(path)
    if not p.is_file():
        raise EdgeInputError(f"edge file {str(p)!r} does not exist (or is not a file)")
    return p


def is_gzip(path: Path) -> bool:
    with open(path, "rb") as f:
        return f.read(2) == b"\x1f\x8b"


def read_bytes(path: Path) -> bytes:
    """The file's bytes, gunzipped when they start with the gzip magic number."""
    raw = path.read_bytes()
    if raw[:2] == b"\x1f\x8b":
        try:
            return zlib.decompress(raw, 47)
        except zlib.error as exc:
            raise EdgeInputError(f"{str(path)!r} is not a readable gzip file: {exc}") from exc
    return raw


def head_lines(path: Path) -> list[str]:
    """The complete lines among the first 64 KiB of a text file (gunzipped), decoded."""
    try:
        opener = gzip.open if is_gzip(path) else open
        with opener(path, "rb") as f:
            head = f.read(_HEAD_BYTES)
    except (OSError, EOFError, zlib.error) as exc:
        raise EdgeInputError(f"{str(path)!r} cannot be read: {exc}") from None
    lines = head.decode("utf-8-sig", "replace").splitlines()
    return lines if len(head) < _HEAD_BYTES else lines[:-1]


# --------------------------------------------------------------------------------------------
# edge lists: pyarrow.csv when one delimiter parses them, else DuckDB
# --------------------------------------------------------------------------------------------
def read_edge_list(path: Path) -> pa.Table:
    """An edge list: the first two fields of each line, integers, ``#`` comments.

    A plain list (comments only at the top, one tab or one space between the fields of every
    line) is read by pyarrow.csv; any other (comments further down, runs of white space,
    tabs and spaces mixed) by DuckDB, line by line, split on white space in SQL. A line
    that is not two integers is named.

    >>> import tempfile, os
    >>> p = os.path.join(tempfile.mkdtemp(), "g.txt")
    >>> _ = open(p, "w").write("# a comment\\n1\\t2\\n\\n2 3 0.5\\n")
    >>> read_edge_list(Path(p)).to_pydict()
    {'src': [1, 2], 'dst': [2, 3]}
    """
    data = read_bytes(path)
    if not data or data.isspace():
        empty = pa.array([], pa.int64())
        return edge_table(empty, empty)
    plain = _plain_edge_list(data)
    return plain if plain is not None else edge_table(*_split_lines(path))


def _plain_edge_list(data: bytes) -> pa.Table | None:
    """The edges of a plain list (see :func:`_read_edge_list`) by pyarrow.csv, int64 columns,
    or None where the text is not plain or pyarrow refuses it (the caller reads it by DuckDB)."""
    offset = 0
    while data.startswith(b"#", offset) or data.startswith(b"\n", offset):
        end = data.find(b"\n", offset)
        if end < 0:
            return None
        offset = end + 1
    end = data.find(b"\n", offset)
    first = data[offset:end if end >= 0 else len(data)].rstrip(b"\r")
    delimiter = "\t" if b"\t" in first else " "
    fields = first.split(delimiter.encode())
    if len(fields) < 2 or not all(INTEGER.fullmatch(f.decode("latin-1")) for f in fields[:2]) \
            or data.find(b"#", offset) >= 0:
        return None
    read = pacsv.ReadOptions(autogenerate_column_names=True)
    parse = pacsv.ParseOptions(delimiter=delimiter, quote_char=False)
    convert = pacsv.ConvertOptions(include_columns=["f0", "f1"],
                                   column_types={"f0": pa.int64(), "f1": pa.int64()})
    try:
        table = pacsv.read_csv(pa.BufferReader(memoryview(data)[offset:]), read_options=read,
                               parse_options=parse, convert_options=convert)
    except (pa.ArrowInvalid, pa.ArrowNotImplementedError):
        return None
    src, dst = (table.column(c).combine_chunks() for c in ("f0", "f1"))
    if src.null_count or dst.null_count:                   # an empty field: not plain
        return None
    return edge_table(src, dst)


#: white space inside a line, as a regular-expression class
_WS = r"[ \t\r\x0b\x0c]"
#: the first two fields of each line that is not blank or a comment: two integers followed by
#: white space, '#' or the end; a line that is not so gives two empty strings
_FIELDS_SQL = rf"""
SELECT m.s AS s, m.d AS d FROM (
  SELECT line, regexp_extract(
      line, '^{_WS}*([+-]?[0-9]+){_WS}+([+-]?[0-9]+)(?:{_WS}|#|$)', ['s', 'd']) AS m
  FROM read_csv($path, columns := {{'line': 'VARCHAR'}}, delim := $delim, quote := '',
                escape := '', header := false, auto_detect := false, strict_mode := false,
                compression := $compression))
WHERE m.s <> '' OR NOT regexp_matches(line, '^{_WS}*(#|$)')
"""


def _split_lines(path: Path) -> list[pa.Array]:
    """The edge list read by DuckDB (parallel, gzip), each line matched in SQL; the keys
    converted by Arrow's integer parser (DuckDB's casts would round ``4.5`` to 5)."""
    con = duckdb.connect()
    try:
        table = con.sql(_FIELDS_SQL, params={
            "path": str(path), "delim": "\x01",           # a byte no edge list holds
            "compression": "gzip" if is_gzip(path) else "none"}
        ).to_arrow_table()
    except duckdb.Error as exc:
        raise _edge_list_error(path) or EdgeInputError(
            f"malformed edge list {str(path)!r}: {str(exc).splitlines()[0]}") from None
    finally:
        con.close()
    bad = pc.any(pc.equal(table["s"], "")).as_py()
    keys = None if bad else _integers(table["s"], table["d"])
    if keys is None:
        raise _edge_list_error(path) or EdgeInputError(f"malformed edge list {str(path)!r}")
    return keys


def _integers(*cols) -> list[pa.Array] | None:
    """Text columns as int64 when every value of all is an integer (Arrow's parser: digits
    with an optional sign, nothing rounded), else None."""
    try:
        return [_whole(pc.cast(c, pa.int64())) for c in cols]
    except (pa.ArrowInvalid, pa.ArrowNotImplementedError):
        return None


def _whole(col) -> pa.Array:
    """One Array of an Array or ChunkedArray."""
    return col.combine_chunks() if isinstance(col, pa.ChunkedArray) else col


_EDGE_LINE = re.compile(rf"{_WS}*([+-]?[0-9]+){_WS}+([+-]?[0-9]+)(?:{_WS}|#|$)")
_BLANK_LINE = re.compile(rf"{_WS}*(#|$)")


def _edge_list_error(path: Path) -> EdgeInputError | None:
    """The first line of an edge list that is not two integers (the rule of ``_FIELDS_SQL``),
    found by reading it line by line once the fast readers have failed, as an error that
    names it."""
    opener = gzip.open if is_gzip(path) else open
    with opener(path, "rt", encoding="utf-8", errors="replace", newline="") as lines:
        for number, line in enumerate(lines, 1):
            line = line.rstrip("\n")
            if _BLANK_LINE.match(line):
                continue
            m = _EDGE_LINE.match(line)
            if m is None:
                fields = line.split("#", 1)[0].split()
                what = ("holds one number, not two (source and destination)"
                        if len(fields) == 1 and INTEGER.fullmatch(fields[0])
                        else "holds a field that is not an integer")
            elif not all(-2**63 <= int(v) < 2**63 for v in m.groups()):
                what = "holds a number outside the 64-bit integer range"
            else:
                continue
            return EdgeInputError(
                f"malformed edge list: line {number} {what}: {line.rstrip()[:80]!r} (edge lists "
                "hold two integers per line; read text keys from a .tsv/.csv file)")
    return None


# --------------------------------------------------------------------------------------------
# CSV / TSV: pyarrow.csv
# --------------------------------------------------------------------------------------------
def read_delimited(path: Path, delimiter: str, src, dst, header, keys=None) -> pa.Table:
    """CSV/TSV text by pyarrow.csv (parallel, strict integers). ``keys``: None chooses integer
    keys when every key of both columns is an integer, text keys when most are not, and
    refuses a column of integers with a few other cells (a bad cell, named with its line);
    ``'int'`` requires integers, ``'str'`` reads every key as text. The header rule: see
    :func:`.readers.read_edges`. The schema metadata says which key type was chosen and why
    (:data:`KEYS_META`), and the header taken (:data:`HEADER_META`).

    >>> import tempfile, os
    >>> p = os.path.join(tempfile.mkdtemp(), "g.csv")
    >>> _ = open(p, "w").write("a,b\\nx,y\\n")
    >>> t = read_delimited(Path(p), ",", None, None, None)
    >>> t.to_pydict(), t.schema.metadata[KEYS_META]
    ({'src': ['x'], 'dst': ['y']}, b"text: line 2 holds 'x', not an integer")
    """
    data = read_bytes(path)
    rows = _first_rows(data, delimiter)
    if header is None:
        header = src is not None or dst is not None or not (rows and _integer_fields(rows[0]))
    if not header and (src is not None or dst is not None):
        raise EdgeInputError("src/dst name header columns, but header=False was given")
    if header and not rows:
        raise EdgeInputError(f"the {_kind(delimiter)} file {str(path)!r} is empty: no header "
                             "row and no edges")
    a, b = pick_columns(rows[0], src, dst) if header else ("f0", "f1")
    meta = {HEADER_META: delimiter.join(rows[0]).encode()} if header else {}
    if keys != "str":
        try:                                               # integer keys: parsed directly
            cols = _read_csv(data, delimiter, header, a, b, pa.int64(), path)
            return edge_table(*cols).replace_schema_metadata({**meta, KEYS_META: b"integer"})
        except pa.ArrowInvalid:                            # some field is not an integer
            pass
    texts = [_whole(pc.utf8_trim_whitespace(c))
             for c in _read_csv(data, delimiter, header, a, b, pa.string(), path)]
    ints = None if keys == "str" else _integers(*texts)
    if ints is not None:
        return edge_table(*ints).replace_schema_metadata({**meta, KEYS_META: b"integer"})
    if keys == "str":
        note = "text, as asked"
    else:
        note = _text_keys_or_refuse(path, data, header, (a, b), texts, keys == "int")
    return edge_table(*texts).replace_schema_metadata({**meta, KEYS_META: note.encode()})


def _text_keys_or_refuse(path, data: bytes, header: bool, names, texts, need_int: bool) -> str:
    """Why the keys are text ('text: line N holds ...'), or an EdgeInputError when they
    must be integers, or look like integers with a few bad cells, or hold an integer beyond
    64 bits."""
    ints = [pc.match_substring_regex(c, r"^[+-]?[0-9]+$").fill_null(False) for c in texts]
    cells = sum(len(c) - c.null_count for c in texts)
    integers = sum(int(pc.sum(m).as_py() or 0) for m in ints)
    wide = _first_wide(texts, ints, names)
    if wide is not None:
        wrow, wname, wtext = wide
        raise EdgeInputError(
            f"{str(path)!r}: line {_line_of(data, wrow + int(header))} holds {wtext} (column "
            f"{wname}), an integer outside the 64-bit range; vertex keys are 64-bit integers "
            "or text: pass keys='str' to index every key as text")
    row, name, col = min(((_first_false(m, c), name, c) for m, c, name in zip(ints, texts, names)
                          if _first_false(m, c) is not None), key=lambda t: t[0])
    line = _line_of(data, row + int(header))
    shown = col[row].as_py()
    if need_int:
        raise EdgeInputError(
            f"{str(path)!r}: integer keys are needed (the index's key type), but line {line} "
            f"holds {shown!r} (column {name})")
    if integers > _MOSTLY_INTEGERS * cells:
        others = cells - integers
        raise EdgeInputError(
            f"{str(path)!r}: the keys are integers but for {others:,} cell{'s' * (others > 1)}, "
            f"the first on line {line}: {shown!r} (column {name}); fix "
            f"{'those lines' if others > 1 else 'that line'}, or pass keys='str' to index "
            "every key as text")
    return f"text: line {line} holds {shown!r}, not an integer"


def _first_false(mask: pa.Array, col: pa.Array) -> int | None:
    """The first row where ``mask`` is false and ``col`` is not NULL."""
    bad = pc.and_(pc.invert(mask), col.is_valid())
    found = pc.index(bad, True).as_py()
    return None if found < 0 else found


def _first_wide(texts, ints, names):
    """``(row, column name, text)`` of the first integer beyond int64, or None."""
    best = None
    for name, col, mask in zip(names, texts, ints):
        long = pc.and_(mask, pc.greater_equal(pc.utf8_length(col), 19)).fill_null(False)
        for row in pc.indices_nonzero(long).to_pylist():
            text = col[row].as_py()
            if not -2**63 <= int(text) < 2**63:
                if best is None or row < best[0]:
                    best = (row, name, text)
                break
    return best


def _line_of(data: bytes, record: int) -> int:
    """The line number of the ``record``-th non-empty line (0-based), as pyarrow.csv counts
    rows (empty lines skipped)."""
    seen = -1
    for number, line in enumerate(io.BytesIO(data), 1):
        if line.strip():
            seen += 1
            if seen == record:
                return number
    return number if data else 1


def _read_csv(data: bytes, delimiter: str, header: bool, src: str, dst: str, typ, path=None):
    """The two key columns as ``typ``; a ragged row is an EdgeInputError naming its line.

    Raises ``pa.ArrowInvalid`` when a field does not convert to ``typ``.
    """
    invalid: list = []
    read = pacsv.ReadOptions(autogenerate_column_names=not header)
    parse = pacsv.ParseOptions(delimiter=delimiter,         # remember each bad row, skip it
                               invalid_row_handler=lambda row: invalid.append(row) or "skip")
    convert = pacsv.ConvertOptions(include_columns=[src, dst], column_types={src: typ, dst: typ})
    try:
        table = pacsv.read_csv(pa.BufferReader(data), read_options=read, parse_options=parse,
                               convert_options=convert)
    except pa.ArrowInvalid as exc:
        if "conversion error" in str(exc).lower():
            raise
        raise EdgeInputError(f"malformed {_kind(delimiter)} file {str(path)!r}: {exc}") from None
    if invalid:
        raise EdgeInputError(f"malformed {_kind(delimiter)} file {str(path)!r}: "
                             f"{_describe_row(data, invalid[0])}")
    return table.column(src).combine_chunks(), table.column(dst).combine_chunks()


def _kind(delimiter: str) -> str:
    return "TSV" if delimiter == "\t" else "CSV"


def _describe_row(data: bytes, row) -> str:
    """'line N has k fields, expected m: <text>' for a row pyarrow.csv refused."""
    number = row.number
    if number is None:                                       # parallel parsing: find the text
        at = data.find(row.text.encode())
        number = data.count(b"\n", 0, at) + 1 if at >= 0 else "?"
    return (f"line {number} has {row.actual_columns} fields, expected {row.expected_columns}: "
            f"{row.text[:80]!r}")


def _first_rows(data: bytes, delimiter: str, rows: int = 2) -> list[list[str]]:
    """The fields of the first non-empty rows (for the header decision and the names)."""
    lines = [ln for ln in data[:_HEAD_BYTES].decode("utf-8-sig", "replace").splitlines()
             if ln.strip()]
    return [[f.strip() for f in fields]
            for fields in csv.reader(io.StringIO("\n".join(lines[:rows])), delimiter=delimiter)]


def _integer_fields(fields: list[str]) -> bool:
    """Whether the first two fields of a row are integers (the header guess)."""
    return len(fields) >= 2 and all(INTEGER.fullmatch(f.strip()) for f in fields[:2])


def pick_columns(names: list[str], src_col, dst_col) -> tuple[str, str]:
    """The endpoint columns: the named ones, else src/dst, else the first two."""
    if src_col is None and dst_col is None and {"src", "dst"} <= set(names):
        return "src", "dst"
    if len(names) < 2 and (src_col is None or dst_col is None):
        raise EdgeInputError(f"an edge file needs two columns; its columns are {names}")
    chosen = (src_col or names[0], dst_col or names[1])
    missing = [c for c in chosen if c not in names]
    if missing:
        raise EdgeInputError(
            f"edge file has no column {', '.join(repr(c) for c in missing)}; its columns are "
            f"{names}"
        )
    return chosen


