"""Edge files -> a pyarrow Table with two key columns ``src`` and ``dst``.

One entry point, :func:`read_edges`, picks the format from the file name (``.gz`` allowed):

* ``*.gra``: GRAIL adjacency lists (``graph_for_greach``, n, then ``u: v1 v2 ... #``), by the
  NumPy parser of :mod:`.gra`;
* ``*.txt``, ``*.edges``, ``*.el``, ``*.snap``, ``*.cites``: edge lists (SNAP): two integers per
  line, white space between, ``#`` comments, later fields ignored; by pyarrow.csv, or DuckDB
  where one delimiter does not fit every line (:mod:`.edge_text`);
* ``*.tsv`` / ``*.csv``: delimited text, with or without a header row, integer or text keys;
  by pyarrow.csv (:mod:`.edge_text`);
* ``*.parquet`` / ``*.pq``: Parquet (also a folder of ``*.parquet`` files);
* ``file.duckdb:table``: a table of a DuckDB database file, opened read-only.

Any other name is told by its first line: ``graph_for_greach`` is ``.gra``, a comma makes CSV, two
integers with white space between make an edge list (so Cora's ``cora.cites`` needs no
``fmt=``). Rows are read as written: the first column is the source. Nothing in an edge list
says which way its edges point, so no orientation is guessed: ``reverse=True`` (``--reverse``)
swaps the columns for files that list ``cited citing``, such as ``cora.cites``.

Integer keys come back as int64, text keys as string. A ``.gra`` file also names vertices
without edges: its vertex count n travels in the schema metadata under ``b"grail.vertices"``
(:data:`grail_duckdb.engine.ingest.VERTEX_COUNT_META`), so the index knows every vertex 0..n-1.

Which parser reads what was measured: DuckDB's CSV reader converts
integers leniently (``4.5`` becomes 5, ``1e3`` 1000), and checking every key's text costs more
than pyarrow.csv's strict parse of a file with one delimiter; on an edge list with runs of
white space, DuckDB splitting lines in SQL is several times faster than the NumPy lexer this
module used to have. Errors name the line at fault.
"""
from __future__ import annotations

import re
from pathlib import Path

import duckdb
import pyarrow as pa
import pyarrow.parquet as pq

from ..engine.ingest import edge_table, parquet_files, read_parquet_edges
from ..errors import EdgeInputError
from ..plugin.names import quote_identifier
from .edge_text import INTEGER as _INTEGER
from .edge_text import existing as _existing
from .edge_text import head_lines as _head_lines
from .edge_text import pick_columns as _pick_columns
from .edge_text import read_bytes as _read_bytes
from .edge_text import read_delimited as _read_delimited
from .edge_text import read_edge_list as _read_edge_list
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


# --------------------------------------------------------------------------------------------
# entry point
# --------------------------------------------------------------------------------------------
def read_edges(path, *, fmt: str | None = None, src: str | None = None, dst: str | None = None,
               reverse: bool = False, header: bool | None = None,
               keys: str | None = None) -> pa.Table:
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
        without). The header taken is in the schema metadata under ``b"grail.header"``.
    keys : {None, 'int', 'str'}, optional
        CSV/TSV only: the key type. By default integer keys when every key is an integer and
        text keys when most are not; a column of integers with a few other cells (a bad cell)
        or an integer beyond 64 bits is refused with the line at fault. ``'int'`` requires
        integers, ``'str'`` reads every key as text. The choice and its reason are in the
        schema metadata under ``b"grail.keys"``.

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
        if keys not in (None, "int", "str"):
            raise EdgeInputError(f"keys= must be 'int', 'str' or None, got {keys!r}")
        table = _read_delimited(_existing(path), "\t" if fmt == "tsv" else ",", src, dst, header,
                                keys)
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


def _swap(table: pa.Table) -> pa.Table:
    """``dst`` becomes ``src`` and back; schema metadata (the .gra vertex count, the key
    type's note) is kept."""
    swapped = pa.table({"src": table.column("dst"), "dst": table.column("src")})
    return swapped.replace_schema_metadata(table.schema.metadata)


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
    files = parquet_files(p) if p.is_dir() else [_existing(p)]
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
