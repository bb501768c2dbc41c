"""Edge files -> a pyarrow Table with two key columns ``src`` and ``dst``.

One entry point, :func:`read_edges`, picks the format from the file name (``.gz`` allowed):

| name | format | read by |
|---|---|---|
| ``*.gra`` | GRAIL adjacency lists (``graph_for_greach``, n, then ``u: v1 v2 ... #``) | :mod:`.gra` |
| ``*.txt``, ``*.edges``, ``*.el``, ``*.snap``, ``*.cites`` | edge list (SNAP): two integers per line, white space between, ``#`` comments, later fields ignored | DuckDB ``read_csv`` |
| ``*.tsv`` / ``*.csv`` | delimited text, with or without a header row, integer or text keys | DuckDB ``read_csv`` |
| ``*.parquet`` / ``*.pq`` | Parquet | pyarrow |
| ``file.duckdb:table`` | a table of a DuckDB database file, opened read-only | DuckDB |

Any other name is told by its first line: ``graph_for_greach`` is ``.gra``, a comma makes CSV, two
integers with white space between make an edge list (so Cora's ``cora.cites`` needs no
``fmt=``). Rows are read as written: the first column is the source. Nothing in an edge list
says which way its edges point, so no orientation is guessed: ``reverse=True`` (``--reverse``)
swaps the columns for files that list ``cited citing``, such as ``cora.cites``.

Integer keys come back as int64, text keys as string. A ``.gra`` file also names vertices
without edges: its vertex count n travels in the schema metadata under ``b"grail.vertices"``
(:data:`grail_duckdb.engine.ingest.VERTEX_COUNT_META`), so the index knows every vertex 0..n-1.

Text files are parsed by DuckDB's CSV reader (parallel, gzip, quotes, comments) with the
dialect set here, every field as text; the keys are then converted by Arrow's integer parser,
which refuses what DuckDB's casts would round (``4.5`` -> 5) or reinterpret (``1e3``, ``0x10``).
An edge list whose lines do not share one delimiter (runs of spaces, tabs and spaces mixed) is
read line by line and split in SQL. Errors name the line at fault.
"""
from __future__ import annotations

import atexit
import csv
import gzip
import io
import re
import threading
import zlib
from pathlib import Path

import duckdb
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from ..engine.ingest import edge_table
from ..errors import EdgeInputError
from ..plugin.names import quote_identifier
from .gra import GRA_MAGIC, parse_gra

__all__ = ["read_edges", "detect_format", "duckdb_target", "FORMATS"]

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
        table = _read_parquet(_existing(path), src, dst)
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
# text through DuckDB's CSV reader
# --------------------------------------------------------------------------------------------
_CONNECTION: list = []
_CONNECTION_LOCK = threading.Lock()
#: index = length of a key's text (DuckDB lists count from 1): the least absolute value of a
#: canonical integer that long; a shorter value means DuckDB rounded or reinterpreted the text
_LEAST = [0] + [10 ** k for k in range(1, 19)]
#: the keys as DuckDB's casts read them, and whether each row's texts are plain integers
_KEYS_SQL = """
SELECT s, d, coalesce((s >= ls OR s <= -ls) AND (d >= ld OR d <= -ld), false) AS plain
FROM (SELECT TRY_CAST(a AS BIGINT) AS s, TRY_CAST(b AS BIGINT) AS d,
             $least[strlen(a)] AS ls, $least[strlen(b)] AS ld
      FROM (SELECT {a} AS a, {b} AS b FROM {scan}))
"""


def _cursor():
    """A cursor of this module's private in-memory DuckDB (made once, closed at exit): a
    connection costs ~15 ms, more than reading a small edge file."""
    with _CONNECTION_LOCK:
        if not _CONNECTION:
            _CONNECTION.append(duckdb.connect())
            atexit.register(_CONNECTION[0].close)
        return _CONNECTION[0].cursor()


def _scan(path: Path, sql: str, options: dict, params: dict | None = None) -> pa.Table:
    """Run ``sql`` over ``read_csv($path, <options>)`` (spelled ``{scan}`` in it); every option
    is a bound parameter. DuckDB's errors propagate."""
    options = {"compression": "gzip" if _is_gzip(path) else "none", "auto_detect": False,
               "quote": "", "escape": "", **options}
    args = ", ".join(f"{k} := ${k}" for k in options)
    cur = _cursor()
    try:
        return cur.sql(sql.format(scan=f"read_csv($path, {args})"),
                       params={"path": str(path), **options, **(params or {})}).to_arrow_table()
    finally:
        cur.close()


def _integer_keys(path: Path, a: str, b: str, options: dict) -> list[pa.Array] | None:
    """Columns ``a`` and ``b`` of the file as int64 when every text is a plain integer (digits,
    a sign), else None. DuckDB parses and casts in parallel; its casts also accept ``4.5``
    (rounded to 5), ``1e3`` and ``0x10``, which a length check refuses: such files, and those
    with negative keys or leading zeros, go to Arrow's strict parser instead."""
    table = _scan(path, _KEYS_SQL.format(a=a, b=b, scan="{scan}"), options, {"least": _LEAST})
    if pc.all(table["plain"]).as_py() is not False:
        return [_whole(table[c]) for c in ("s", "d")]
    text = _scan(path, f"SELECT {a} AS s, {b} AS d FROM {{scan}}", options)
    return _integers(text["s"], text["d"])


def _csv_error(exc: duckdb.Error, what: str) -> EdgeInputError:
    """DuckDB's CSV error as ours: ``malformed TSV file: line 3 has 3 fields, expected 2:
    '3\\t4\\t5'`` (DuckDB names the line of the file, counted from 1)."""
    message = str(exc)
    line = re.search(r"CSV Error on Line: (\d+)", message)
    text = re.search(r"Original Line: ?(.*)", message)
    count = re.search(r"Expected Number of Columns: (\d+) Found: (\d+)", message)
    shown = f": {text.group(1)[:80]!r}" if text else ""
    if line and count:
        return EdgeInputError(f"malformed {what}: line {line.group(1)} has {count.group(2)} "
                              f"fields, expected {count.group(1)}{shown}")
    if line:
        detail = message.splitlines()[0].split(": ", 1)[-1]
        return EdgeInputError(f"malformed {what}: line {line.group(1)}{shown} ({detail})")
    return EdgeInputError(f"malformed {what}: {message.splitlines()[0]}")


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


def _first_data_line(path: Path) -> str | None:
    """The first line that is neither blank nor a ``#`` comment, its comment cut off."""
    for line in _head_lines(path):
        text = line.split("#", 1)[0].strip(_SPACE)
        if text:
            return text
    return None


def _read_edge_list(path: Path) -> pa.Table:
    """An edge list: the first two fields of each line, integers, ``#`` comments.

    The delimiter of the first data line is tried for the whole file; a file whose lines do
    not share it (runs of spaces, tabs and spaces mixed) is read line by line and split on
    white space in SQL. A field that is not an integer gets the line named.

    >>> import tempfile, os
    >>> p = os.path.join(tempfile.mkdtemp(), "g.txt")
    >>> _ = open(p, "w").write("# a comment\\n1\\t2\\n\\n2 3 0.5\\n")
    >>> read_edges(p).to_pydict()
    {'src': [1, 2], 'dst': [2, 3]}
    """
    first = _first_data_line(path)
    if first is None:
        empty = pa.array([], pa.int64())
        return edge_table(empty, empty)
    delim = "\t" if "\t" in first else " "
    columns = {f"c{i}": "VARCHAR" for i in range(max(len(first.split(delim)), 2))}
    try:
        keys = _integer_keys(path, "c0", "c1", {"delim": delim, "header": False,
                                                "comment": "#", "columns": columns})
    except duckdb.Error:
        keys = None
    return edge_table(*(keys or _split_lines(path)))


#: the first two white-space separated fields of a line, once its comment is cut off
_FIELDS_SQL = r"""
SELECT f[1] AS s, f[2] AS d, len(f) AS n FROM (
  SELECT string_split_regex(regexp_replace(split_part(line, '#', 1),
                                           '^[ \t\r\x0b\x0c]+|[ \t\r\x0b\x0c]+$', '', 'g'),
                            '[ \t\r\x0b\x0c]+') AS f
  FROM {scan})
WHERE f[1] <> ''
"""


def _split_lines(path: Path) -> list[pa.Array]:
    """The slow path of :func:`_read_edge_list`: each line split on white space in SQL."""
    try:
        table = _scan(path, _FIELDS_SQL, {"delim": "\x01", "header": False, "strict_mode": False,
                                          "columns": {"line": "VARCHAR"}})
    except duckdb.Error as exc:
        raise _edge_list_error(path) or _csv_error(exc, "edge list") from None
    keys = None if pc.any(pc.less(table["n"], 2)).as_py() else _integers(table["s"], table["d"])
    if keys is None:
        raise _edge_list_error(path) or EdgeInputError(f"malformed edge list {str(path)!r}")
    return keys


def _edge_list_error(path: Path) -> EdgeInputError | None:
    """The first line of an edge list that is not two integers, found by reading it line by
    line (only once the fast readers have failed), as an error that names it."""
    opener = gzip.open if _is_gzip(path) else open
    with opener(path, "rt", encoding="utf-8", errors="replace", newline="") as lines:
        for number, line in enumerate(lines, 1):
            fields = line.split("#", 1)[0].strip(_SPACE + "\n").split()
            if not fields:
                continue
            if len(fields) < 2:
                what = "holds one number, not two (source and destination)"
            elif not all(_INTEGER.fullmatch(f) for f in fields[:2]):
                what = "holds a field that is not an integer"
            elif not all(-2**63 <= int(f) < 2**63 for f in fields[:2]):
                what = "holds a number outside the 64-bit integer range"
            else:
                continue
            return EdgeInputError(
                f"malformed edge list: line {number} {what}: {line.rstrip()[:80]!r} (edge lists "
                "hold two integers per line; read text keys from a .tsv/.csv file)")
    return None


def _read_delimited(path: Path, delim: str, src, dst, header) -> pa.Table:
    """CSV/TSV: the header decided and the columns named here, the rows parsed by DuckDB;
    integer keys when every key of both columns is an integer, else text (trimmed)."""
    what = "TSV file" if delim == "\t" else "CSV file"
    rows = [r for r in _head_lines(path)[:2] if r.strip()]
    first = next(csv.reader(io.StringIO(rows[0]), delimiter=delim)) if rows else []
    if header is None:
        header = src is not None or dst is not None or not _integer_fields(first)
    if not header and (src is not None or dst is not None):
        raise EdgeInputError("src/dst name header columns, but header=False was given")
    if header and not rows:
        raise EdgeInputError(f"the {what} is empty: no header row")
    if not rows:
        empty = pa.array([], pa.int64())
        return edge_table(empty, empty)
    names = [f.strip() for f in first] if header else [f"column{i}" for i in range(len(first))]
    a, b = (quote_identifier(c) for c in _pick_columns(names, src, dst))
    options = {"delim": delim, "header": header, "quote": '"', "escape": '"',
               "columns": {n: "VARCHAR" for n in names}}
    try:
        data = rows[1] if header and len(rows) > 1 else None if header else rows[0]
        row = next(csv.reader(io.StringIO(data), delimiter=delim)) if data else []
        keys = _integer_keys(path, a, b, options) if _integer_fields(row) else None
        if keys is None:
            text = _scan(path, f"SELECT {a} AS s, {b} AS d FROM {{scan}}", options)
            keys = [_whole(pc.utf8_trim_whitespace(text[c])) for c in ("s", "d")]
            keys = _integers(*keys) or keys
    except duckdb.Error as exc:
        raise _csv_error(exc, what) from None
    return edge_table(*keys)


def _integer_fields(fields: list[str]) -> bool:
    """Whether the first two fields of a row are integers (the header and key-type guess)."""
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


def _read_parquet(path: Path, src_col, dst_col) -> pa.Table:
    """The two endpoint columns of a Parquet file."""

    try:
        names = pq.read_schema(path).names
    except (pa.ArrowInvalid, OSError) as exc:
        raise EdgeInputError(f"{str(path)!r} is not a readable Parquet file: {exc}") from None
    src, dst = _pick_columns(names, src_col, dst_col)
    table = pq.read_table(path, columns=[src, dst])
    return edge_table(_normalised(table.column(src), src), _normalised(table.column(dst), dst))


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
