"""Edge files -> a pyarrow Table with two key columns ``src`` and ``dst``.

One entry point, :func:`read_edges`, picks the format from the file name (``.gz`` allowed):

| name | format | read by |
|---|---|---|
| ``*.gra`` | GRAIL adjacency lists (``graph_for_greach``, n, then ``u: v1 v2 ... #``) | :mod:`.gra` (NumPy) |
| ``*.txt``, ``*.edges``, ``*.el``, ``*.snap``, ``*.cites`` | edge list (SNAP): two integers per line, white space between, ``#`` comments, later fields ignored | pyarrow.csv; DuckDB when one delimiter does not fit every line |
| ``*.tsv`` / ``*.csv`` | delimited text, with or without a header row, integer or text keys | pyarrow.csv |
| ``*.parquet`` / ``*.pq`` | Parquet (also a folder of ``*.parquet`` files) | pyarrow |
| ``file.duckdb:table`` | a table of a DuckDB database file, opened read-only | DuckDB |

Any other name is told by its first line: ``graph_for_greach`` is ``.gra``, a comma makes CSV, two
integers with white space between make an edge list (so Cora's ``cora.cites`` needs no
``fmt=``). Rows are read as written: the first column is the source. Nothing in an edge list
says which way its edges point, so no orientation is guessed: ``reverse=True`` (``--reverse``)
swaps the columns for files that list ``cited citing``, such as ``cora.cites``.

Integer keys come back as int64, text keys as string. A ``.gra`` file also names vertices
without edges: its vertex count n travels in the schema metadata under ``b"grail.vertices"``
(:data:`grail_duckdb.engine.ingest.VERTEX_COUNT_META`), so the index knows every vertex 0..n-1.

Which parser reads what was measured (README, "Readers"): DuckDB's CSV reader converts
integers leniently (``4.5`` becomes 5, ``1e3`` 1000), and checking every key's text costs more
than pyarrow.csv's strict parse of a file with one delimiter; on an edge list with runs of
white space, DuckDB splitting lines in SQL is several times faster than the NumPy lexer this
module used to have. Errors name the line at fault.
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
import pyarrow.parquet as pq

from ..engine.ingest import edge_table, read_parquet_edges
from ..errors import EdgeInputError
from ..plugin.names import quote_identifier
from .gra import GRA_MAGIC, parse_gra

__all__ = ["read_edges", "detect_format", "duckdb_target", "parquet_edge_columns", "FORMATS"]

#: the formats :func:`read_edges` understands (``fmt=`` values)
FORMATS = ("gra", "snap", "tsv", "csv", "parquet", "duckdb")

_EXTENSIONS = {
    ".gra": "gra", ".txt": "snap", ".snap": "snap", ".edges": "snap", ".el": "snap",
    ".cites": "snap", ".tsv": "tsv", ".tab": "tsv", ".csv": "csv", ".parquet": "parquet",
    ".pq": "parquet",
}
#: ``some/file.duckdb:table`` (also ``.ddb`` and ``.db``)
_DUCKDB_TARGET = re.compile(r"^(?P<db>.+?\.(?:duckdb|ddb|db)):(?P<table>.+)$", re.DOTALL)
#: how much of a text file is looked at to choose its header, delimiter and columns
_HEAD_BYTES = 1 << 16
_SPACE = " \t\r\x0b\x0c"
_INTEGER = re.compile(r"[+-]?[0-9]+")


# --------------------------------------------------------------------------------------------
# entry point
# --------------------------------------------------------------------------------------------
def read_edges(path, *, fmt: str | None = None, src: str | None = None, dst: str | None = None,
               reverse: bool = False, header: bool | None = None) -> pa.Table:
    """Read an edge file into a Table with columns ``src`` and ``dst``.

    Parameters
    ----------
    path : str or Path
        The edge file; ``db.duckdb:table`` names a table of a DuckDB database file.
    fmt : str, optional
        One of :data:`FORMATS` (``--format`` on the command line); by default taken from the
        file name, else from its first line.
    src, dst : str, optional
        The endpoint columns of a CSV/TSV file with a header, a Parquet file or a DuckDB
        table (the names ``build_index`` and SQL's ``grail_index`` use). Default: ``src``/
        ``dst`` when present, else the first two columns.
    reverse : bool
        Swap the two columns (for files that list ``cited citing``, such as cora.cites).
    header : bool, optional
        CSV/TSV only: whether the first row holds column names. By default a header is
        assumed when ``src``/``dst`` is given, or when the first row is not two integers
        (so a file of text keys is assumed to have a header: pass ``header=False`` for one
        without).

    Returns
    -------
    pyarrow.Table
        ``src`` and ``dst``, int64 for integer keys, string for text keys.

    Raises
    ------
    EdgeInputError
        A missing file, an unknown format, a malformed line (its line number is named), a
        wrong ``.gra`` header, a missing column or table.

    Examples
    --------
    >>> import tempfile, os
    >>> p = os.path.join(tempfile.mkdtemp(), "g.gra")
    >>> _ = open(p, "w").write("graph_for_greach\\n3\\n0: 1 2 #\\n1: #\\n2: #\\n")
    >>> t = read_edges(p)
    >>> t.column("dst").to_pylist(), t.schema.metadata[b"grail.vertices"]
    ([1, 2], b'3')
    """
    if fmt is None:
        fmt = detect_format(path)
    fmt = _EXTENSIONS.get("." + fmt.lower(), fmt.lower())   # 'txt' -> 'snap', 'pq' -> 'parquet'
    if fmt not in FORMATS:
        raise EdgeInputError(f"unknown edge file format {fmt!r}; use one of {', '.join(FORMATS)}")
    if fmt == "duckdb":
        table = _read_duckdb(str(path), src, dst)
    elif fmt == "parquet":
        table = _read_parquet(Path(path), src, dst)
    elif fmt == "gra":
        table = parse_gra(_read_bytes(_existing(path)))
    elif fmt == "snap":
        if src is not None or dst is not None:
            raise EdgeInputError(
                "an edge list has no column names: src= and dst= name the columns "
                "of CSV/TSV files with a header, Parquet files and DuckDB tables")
        table = _read_edge_list(_existing(path))
    else:
        table = _read_delimited(_existing(path), "\t" if fmt == "tsv" else ",", src, dst, header)
    return _swap(table) if reverse else table


def detect_format(path) -> str:
    """The format of an edge file from its name (``.gz`` ignored), else from its first line.

    >>> detect_format("cit-HepTh.tsv.gz"), detect_format("g.duckdb:cites")
    ('tsv', 'duckdb')
    >>> detect_format("cora.cites.gz")
    'snap'
    """
    text = str(path)
    if duckdb_target(text) is not None and not Path(text).exists():
        return "duckdb"
    if Path(text).is_dir():  # a folder of Parquet files
        return "parquet"
    name = Path(text).name.lower()
    if name.endswith(".gz"):
        name = name[:-3]
    suffix = Path(name).suffix
    if suffix in _EXTENSIONS:
        return _EXTENSIONS[suffix]
    sniffed = _sniff(Path(text)) if Path(text).is_file() else None
    if sniffed is not None:
        return sniffed
    raise EdgeInputError(
        f"cannot tell the format of {text!r} from its name or its first line; name it *.gra, "
        "*.txt (edge list), *.tsv, *.csv, *.parquet (each optionally .gz), or file.duckdb:table, "
        f"or pass fmt= one of {', '.join(FORMATS)}"
    )


def duckdb_target(text: str) -> tuple[str, str] | None:
    """``(database file, table)`` of ``file.duckdb:table`` (also ``.ddb``, ``.db``), or None.

    >>> duckdb_target("data/papers.duckdb:cites"), duckdb_target("edges.tsv")
    (('data/papers.duckdb', 'cites'), None)
    """
    m = _DUCKDB_TARGET.match(str(text))
    return None if m is None else (m.group("db"), m.group("table"))


def _sniff(path: Path) -> str | None:
    """The format told by a file's first bytes: Parquet magic, the .gra line, or the first
    data line of a text file (a comma: CSV; two integers: edge list; a tab: TSV)."""
    with open(path, "rb") as f:
        if f.read(4) == b"PAR1":
            return "parquet"
    rows = _head_lines(path)
    if rows and rows[0].strip().encode() == GRA_MAGIC:
        return "gra"
    data = [r for r in rows if r.strip() and not r.lstrip().startswith("#")]
    if not data:
        return None
    first = data[0]
    if "," in first:
        return "csv"
    fields = first.split("#", 1)[0].split()
    if len(fields) >= 2 and all(_INTEGER.fullmatch(f) for f in fields[:2]):
        return "snap"
    return "tsv" if "\t" in first else None


def _existing(path) -> Path:
    """The path, checked to be an existing file."""
    p = Path(path)
    if not p.is_file():
        raise EdgeInputError(f"edge file {str(p)!r} does not exist (or is not a file)")
    return p


def _is_gzip(path: Path) -> bool:
    with open(path, "rb") as f:
        return f.read(2) == b"\x1f\x8b"


def _read_bytes(path: Path) -> bytes:
    """The file's bytes, gunzipped when they start with the gzip magic number."""
    raw = path.read_bytes()
    if raw[:2] == b"\x1f\x8b":
        try:
            return zlib.decompress(raw, 47)
        except zlib.error as exc:
            raise EdgeInputError(f"{str(path)!r} is not a readable gzip file: {exc}") from exc
    return raw


def _head_lines(path: Path) -> list[str]:
    """The complete lines among the first 64 KiB of a text file (gunzipped), decoded."""
    try:
        opener = gzip.open if _is_gzip(path) else open
        with opener(path, "rb") as f:
            head = f.read(_HEAD_BYTES)
    except (OSError, EOFError, zlib.error) as exc:
        raise EdgeInputError(f"{str(path)!r} cannot be read: {exc}") from None
    lines = head.decode("utf-8-sig", "replace").splitlines()
    return lines if len(head) < _HEAD_BYTES else lines[:-1]


def _swap(table: pa.Table) -> pa.Table:
    """``dst`` becomes ``src`` and back; schema metadata (the .gra vertex count) is kept."""
    swapped = pa.table({"src": table.column("dst"), "dst": table.column("src")})
    return swapped.replace_schema_metadata(table.schema.metadata)


# --------------------------------------------------------------------------------------------
# edge lists: pyarrow.csv when one delimiter parses them, else DuckDB
# --------------------------------------------------------------------------------------------
def _read_edge_list(path: Path) -> pa.Table:
    """An edge list: the first two fields of each line, integers, ``#`` comments.

    A plain list (comments only at the top, one tab or one space between the fields of every
    line) is read by pyarrow.csv; any other (comments further down, runs of white space,
    tabs and spaces mixed) by DuckDB, line by line, split on white space in SQL. A line
    that is not two integers is named.

    >>> import tempfile, os
    >>> p = os.path.join(tempfile.mkdtemp(), "g.txt")
    >>> _ = open(p, "w").write("# a comment\\n1\\t2\\n\\n2 3 0.5\\n")
    >>> read_edges(p).to_pydict()
    {'src': [1, 2], 'dst': [2, 3]}
    """
    data = _read_bytes(path)
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
    if len(fields) < 2 or not all(_INTEGER.fullmatch(f.decode("latin-1")) for f in fields[:2]) \
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
            "compression": "gzip" if _is_gzip(path) else "none"}
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
    opener = gzip.open if _is_gzip(path) else open
    with opener(path, "rt", encoding="utf-8", errors="replace", newline="") as lines:
        for number, line in enumerate(lines, 1):
            line = line.rstrip("\n")
            if _BLANK_LINE.match(line):
                continue
            m = _EDGE_LINE.match(line)
            if m is None:
                fields = line.split("#", 1)[0].split()
                what = ("holds one number, not two (source and destination)"
                        if len(fields) == 1 and _INTEGER.fullmatch(fields[0])
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
def _read_delimited(path: Path, delimiter: str, src, dst, header) -> pa.Table:
    """CSV/TSV text by pyarrow.csv (parallel, strict integers); integer keys when every key of
    both columns is an integer, else text (trimmed). See :func:`read_edges` for the header.

    >>> import tempfile, os
    >>> p = os.path.join(tempfile.mkdtemp(), "g.csv")
    >>> _ = open(p, "w").write("a,b\\nx,y\\n")
    >>> read_edges(p).to_pydict()
    {'src': ['x'], 'dst': ['y']}
    """
    data = _read_bytes(path)
    rows = _first_rows(data, delimiter)
    if header is None:
        header = src is not None or dst is not None or not (rows and _integer_fields(rows[0]))
    if not header and (src is not None or dst is not None):
        raise EdgeInputError("src/dst name header columns, but header=False was given")
    if header and not rows:
        raise EdgeInputError(f"the {_kind(delimiter)} file is empty: no header row")
    a, b = _pick_columns(rows[0], src, dst) if header else ("f0", "f1")
    try:                                                   # integer keys: parsed directly
        return edge_table(*_read_csv(data, delimiter, header, a, b, pa.int64()))
    except pa.ArrowInvalid:                                # some field is not an integer
        pass
    keys = [_whole(pc.utf8_trim_whitespace(c))
            for c in _read_csv(data, delimiter, header, a, b, pa.string())]
    return edge_table(*(_integers(*keys) or keys))


def _read_csv(data: bytes, delimiter: str, header: bool, src: str, dst: str, typ):
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
        raise EdgeInputError(f"malformed {_kind(delimiter)} file: {exc}") from None
    if invalid:
        raise EdgeInputError(f"malformed {_kind(delimiter)} file: {_describe_row(data, invalid[0])}")
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
    return len(fields) >= 2 and all(_INTEGER.fullmatch(f.strip()) for f in fields[:2])


def _pick_columns(names: list[str], src_col, dst_col) -> tuple[str, str]:
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


# --------------------------------------------------------------------------------------------
# Parquet, DuckDB
# --------------------------------------------------------------------------------------------
def _normalised(col, name: str) -> pa.Array:
    """Integer keys as int64, text keys as string; other types are refused."""
    col = col.combine_chunks() if isinstance(col, pa.ChunkedArray) else col
    if pa.types.is_dictionary(col.type):
        col = col.dictionary_decode()
    if pa.types.is_integer(col.type):
        return col.cast(pa.int64())
    if pa.types.is_string(col.type) or pa.types.is_large_string(col.type) \
            or pa.types.is_string_view(col.type):
        return col.cast(pa.string())
    raise EdgeInputError(
        f"column {name!r} holds {col.type}; vertex keys must be integers or text: cast it first"
    )


def parquet_edge_columns(path, src_col=None, dst_col=None) -> tuple[str, str]:
    """The endpoint columns of a Parquet file, or of a folder of them (its first file)."""
    p = Path(path)
    files = sorted(p.glob("*.parquet")) if p.is_dir() else [_existing(p)]
    if not files:
        raise EdgeInputError(f"the folder {str(p)!r} holds no *.parquet file")
    try:
        names = pq.read_schema(files[0]).names
    except (pa.ArrowInvalid, OSError) as exc:
        raise EdgeInputError(f"{str(files[0])!r} is not a readable Parquet file: {exc}") from None
    return _pick_columns(names, src_col, dst_col)


def _read_parquet(path: Path, src_col, dst_col) -> pa.Table:
    """The two endpoint columns of a Parquet file or of a folder of them (read in parallel),
    normalised (int64 or string) with the files' vertex count kept."""
    src, dst = parquet_edge_columns(path, src_col, dst_col)
    table = read_parquet_edges(path, src, dst)
    out = edge_table(_normalised(table.column(0), src), _normalised(table.column(1), dst))
    return out.replace_schema_metadata(table.schema.metadata)


def _read_duckdb(target: str, src_col, dst_col) -> pa.Table:
    """The endpoint columns of ``db.duckdb:table``, the database opened read-only."""
    parts = duckdb_target(target)
    if parts is None:
        raise EdgeInputError(f"name a DuckDB table as 'file.duckdb:table', got {target!r}")
    db, table = _existing(parts[0]), parts[1]
    try:
        con = duckdb.connect(str(db), read_only=True)
    except duckdb.Error as exc:
        raise EdgeInputError(f"cannot open DuckDB database {str(db)!r}: {exc}") from None
    try:
        names = _duckdb_columns(con, db, table)
        src, dst = _pick_columns(names, src_col, dst_col)
        sql = (f"SELECT {quote_identifier(src)}, {quote_identifier(dst)} "
               f"FROM {quote_identifier(table)}")
        result = con.sql(sql).to_arrow_table()
    finally:
        con.close()
    return edge_table(_normalised(result.column(0), src), _normalised(result.column(1), dst))


def _duckdb_columns(con, db: Path, table: str) -> list[str]:
    """Column names of a table or view (looked up with a bound parameter)."""
    rows = con.execute(
        "SELECT column_name FROM information_schema.columns WHERE lower(table_name) = lower(?) "
        "ORDER BY ordinal_position", [table]).fetchall()
    if not rows:
        tables = [r[0] for r in con.execute(
            "SELECT table_name FROM information_schema.tables ORDER BY 1").fetchall()]
        raise EdgeInputError(
            f"DuckDB database {str(db)!r} has no table {table!r}; its tables are {tables}"
        )
    return [r[0] for r in rows]
