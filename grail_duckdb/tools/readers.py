"""Edge files -> a pyarrow Table with two key columns ``src`` and ``dst``.

One entry point, :func:`read_edges`, picks the format from the file name (``.gz`` allowed):

| name | format |
|---|---|
| ``*.gra`` | GRAIL adjacency lists (``graph_for_greach``, n, then ``u: v1 v2 ... #``) |
| ``*.txt`` | SNAP edge list: whitespace-separated integers, ``#`` comments |
| ``*.tsv`` / ``*.csv`` | delimited text, with or without a header row |
| ``*.parquet`` / ``*.pq`` | Parquet (also a folder of ``*.parquet`` files) |
| ``file.duckdb:table`` | a table of a DuckDB database file, opened read-only |

Integer keys come back as int64, text keys as string. A ``.gra`` file also names vertices
without edges: its vertex count n travels in the schema metadata under ``b"grail.vertices"``
(:data:`grail_duckdb.engine.ingest.VERTEX_COUNT_META`), so the index knows every vertex 0..n-1.

The two whitespace formats (``.gra``, SNAP) are parsed by whole-array NumPy passes over the
bytes (no Python loop per edge): one pass classifies every byte, the symbols (numbers, ``:``,
``#``, newlines) are checked against the line grammar all at once, and numbers are decoded
digit column by digit column. citeseer.scc (694K lines) parses in about a tenth of a second.
"""
from __future__ import annotations

import re
import zlib
from pathlib import Path

import duckdb
import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.csv as pacsv
import pyarrow.parquet as pq

from ..errors import EdgeInputError
from ..engine.ingest import edge_table, read_parquet_edges
from ..plugin.names import quote_identifier

__all__ = ["read_edges", "detect_format", "parquet_edge_columns", "FORMATS"]

#: the formats :func:`read_edges` understands (``fmt=`` values)
FORMATS = ("gra", "snap", "tsv", "csv", "parquet", "duckdb")

_EXTENSIONS = {
    ".gra": "gra", ".txt": "snap", ".snap": "snap", ".edges": "snap", ".el": "snap",
    ".tsv": "tsv", ".tab": "tsv", ".csv": "csv", ".parquet": "parquet", ".pq": "parquet",
}
#: ``some/file.duckdb:table`` (also ``.ddb`` and ``.db``)
_DUCKDB_TARGET = re.compile(r"^(?P<db>.+?\.(?:duckdb|ddb|db)):(?P<table>.+)$", re.DOTALL)
_GRA_MAGIC = b"graph_for_greach"
#: int64 holds every 18-digit decimal number
_MAX_DIGITS = 18


# --------------------------------------------------------------------------------------------
# entry point
# --------------------------------------------------------------------------------------------
def read_edges(path, *, fmt: str | None = None, src_col: str | None = None,
               dst_col: str | None = None, reverse: bool = False,
               header: bool | None = None) -> pa.Table:
    """Read an edge file into a Table with columns ``src`` and ``dst``.

    Parameters
    ----------
    path : str or Path
        The edge file; ``db.duckdb:table`` names a table of a DuckDB database file.
    fmt : str, optional
        One of :data:`FORMATS`; by default taken from the file name.
    src_col, dst_col : str, optional
        The endpoint columns of a CSV/TSV file with a header, a Parquet file or a DuckDB
        table. Default: ``src``/``dst`` when present, else the first two columns.
    reverse : bool
        Swap the two columns (for files that list ``cited citing``, such as cora.cites).
    header : bool, optional
        CSV/TSV only: whether the first row holds column names. By default a header is
        assumed when ``src_col``/``dst_col`` is given, or when the first row is not two
        integers (so a file of text keys is assumed to have a header: pass
        ``header=False`` for one without).

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
    fmt = detect_format(path) if fmt is None else fmt.lower()
    fmt = _EXTENSIONS.get("." + fmt, fmt)                 # 'txt' -> 'snap', 'pq' -> 'parquet'
    if fmt not in FORMATS:
        raise EdgeInputError(f"unknown edge file format {fmt!r}; use one of {', '.join(FORMATS)}")
    if fmt == "duckdb":
        table = _read_duckdb(str(path), src_col, dst_col)
    elif fmt == "parquet":
        table = _read_parquet(Path(path), src_col, dst_col)
    else:
        data = _read_bytes(_existing(path))
        if fmt == "gra":
            table = parse_gra(data)
        elif fmt == "snap":
            table = parse_snap(data)
        else:
            table = parse_delimited(data, "\t" if fmt == "tsv" else ",", src_col, dst_col, header)
    return _swap(table) if reverse else table


def detect_format(path) -> str:
    """The format of an edge file from its name (``.gz`` ignored).

    >>> detect_format("cit-HepTh.tsv.gz"), detect_format("g.duckdb:cites")
    ('tsv', 'duckdb')
    """
    text = str(path)
    if _DUCKDB_TARGET.match(text) and not Path(text).exists():
        return "duckdb"
    if Path(text).is_dir():  # a folder of Parquet files
        return "parquet"
    name = Path(text).name.lower()
    if name.endswith(".gz"):
        name = name[:-3]
    suffix = Path(name).suffix
    if suffix in _EXTENSIONS:
        return _EXTENSIONS[suffix]
    raise EdgeInputError(
        f"cannot tell the format of {text!r} from its name; name it *.gra, *.txt (SNAP), *.tsv, "
        "*.csv, *.parquet (each optionally .gz), or file.duckdb:table, or pass "
        f"fmt= one of {', '.join(FORMATS)}"
    )


def _existing(path) -> Path:
    """The path, checked to be an existing file."""
    p = Path(path)
    if not p.is_file():
        raise EdgeInputError(f"edge file {str(p)!r} does not exist (or is not a file)")
    return p


def _read_bytes(path: Path) -> bytes:
    """The file's bytes, gunzipped when they start with the gzip magic number."""
    raw = path.read_bytes()
    if raw[:2] == b"\x1f\x8b":
        try:
            return zlib.decompress(raw, 47)
        except zlib.error as exc:
            raise EdgeInputError(f"{str(path)!r} is not a readable gzip file: {exc}") from exc
    return raw


def _swap(table: pa.Table) -> pa.Table:
    """``dst`` becomes ``src`` and back; schema metadata (the .gra vertex count) is kept."""
    swapped = pa.table({"src": table.column("dst"), "dst": table.column("src")})
    return swapped.replace_schema_metadata(table.schema.metadata)


# --------------------------------------------------------------------------------------------
# whitespace formats: one lexer over the bytes, two grammars
# --------------------------------------------------------------------------------------------
_NUM, _COLON, _HASH, _NL, _BAD = 1, 2, 3, 4, 5
_WHITE = b" \t\r\x0b\x0c"


def _symbol_table(punctuation: dict[int, int]) -> np.ndarray:
    """Byte -> symbol code: 0 for digits and white space, the given codes, _BAD otherwise."""
    table = np.full(256, _BAD, np.uint8)
    table[48:58] = 0
    table[list(_WHITE)] = 0
    for byte, code in punctuation.items():
        table[byte] = code
    table[10] = _NL
    return table


class _Lexed:
    """The symbols of a text in order: kind (``_NUM`` ...), byte position, line (0-based).

    ``values`` holds the decoded numbers, one per ``_NUM`` symbol, in order; ``clean_end``
    says whether white space follows each. Trailing blank lines are dropped and the symbols
    always end with a newline, so every line's symbols are followed by ``_NL``. Each byte is
    touched by a handful of whole-array passes only (no copy of the text); the rest works on
    the (far fewer) symbols.
    """

    def __init__(self, data: bytes, offset: int, punctuation: dict[int, int], signed: bool):
        b = np.frombuffer(data, np.uint8, offset=offset)
        digit = np.zeros(b.shape[0] + 1, bool)            # a False sentinel ends every run
        np.less(b - np.uint8(48), 10, out=digit[:-1])
        start = np.empty(b.shape[0], bool)
        start[:1] = digit[:1]
        np.greater(digit[1:-1], digit[:-2], out=start[1:])  # a digit after a non-digit
        kind = _symbol_table(punctuation)[b]
        if signed and b"-" in data:
            _mark_signs(b, digit, start, kind)
        kind |= start.view(np.uint8)                      # _NUM == 1; digits are 0 in kind
        pos = np.flatnonzero(kind)
        sym = kind[pos]
        content = np.flatnonzero(sym != _NL)
        keep = int(content[-1]) + 1 if content.shape[0] else 0   # drop trailing blank lines
        if 0 < keep < sym.shape[0]:                        # keep the last line's newline
            self.pos, self.kind = pos[:keep + 1], sym[:keep + 1]
        elif keep:                                         # unterminated: add the newline
            self.pos, self.kind = np.append(pos, b.shape[0]), np.append(sym, np.uint8(_NL))
        else:
            self.pos, self.kind = pos[:0], sym[:0]
        is_nl = (self.kind == _NL).view(np.uint8)
        self.line = np.cumsum(is_nl, dtype=np.int32)
        self.line -= is_nl                                 # the newline belongs to its line
        self.lines = int(self.line[-1]) + 1 if keep else 0
        starts = self.pos[self.kind == _NUM]
        self.values, ends, too_long = _decode_numbers(b, starts, digit)
        if too_long is not None:
            line = int(self.line[self.kind == _NUM][too_long])
            raise _LineError(line, "holds a number with more than 18 digits")
        after = ends + 1
        follower = np.where(after < b.shape[0], b[np.minimum(after, b.shape[0] - 1)], 10)
        self.clean_end = (_symbol_table({})[follower] == 0) | (follower == 10)


def _mark_signs(b, digit, start, kind) -> None:
    """A '-' right before a digit and after white space (or at the start) opens a number."""
    minus = np.flatnonzero(b[:-1] == 45)
    minus = minus[digit[minus + 1]]
    before = b[np.maximum(minus - 1, 0)]
    minus = minus[(minus == 0) | np.isin(before, np.frombuffer(_WHITE + b"\n", np.uint8))]
    start[minus + 1] = False
    kind[minus] = 0
    start[minus] = True


class _LineError(Exception):
    """A grammar violation at a 0-based line of the parsed text (turned into EdgeInputError)."""

    def __init__(self, line: int, what: str):
        super().__init__(what)
        self.line, self.what = line, what


def _decode_numbers(b: np.ndarray, starts: np.ndarray, digit: np.ndarray):
    """Decimal values of the numbers starting at ``starts`` (optional leading '-').

    Every digit run of the text is one number. The digits are packed into one buffer (one
    NumPy pass), which with the run lengths as offsets is an Arrow string array; Arrow's
    integer parser then decodes all numbers at once. ``digit`` has a False sentinel after
    the text. Returns ``(values int64, position of each last digit, index of the first
    number with more than 18 digits or None)``.
    """
    neg = b[starts] == 45
    ends = np.flatnonzero(digit[:-1] & ~digit[1:])
    lengths = ends - starts - neg + 1
    too_long = _first(lengths > _MAX_DIGITS)
    if too_long is not None:
        return None, ends, too_long
    offsets = np.zeros(starts.shape[0] + 1, np.int64)
    np.cumsum(lengths, out=offsets[1:])
    packed = b[digit[:-1]]
    text = pa.LargeStringArray.from_buffers(starts.shape[0], pa.py_buffer(offsets),
                                            pa.py_buffer(packed))
    values = pc.cast(text, pa.int64()).to_numpy()
    if neg.any():
        values = np.where(neg, -values, values)
    return values, ends, None


def _first(flags: np.ndarray):
    """Index of the first True, or None."""
    i = int(np.argmax(flags)) if flags.shape[0] else 0
    return i if flags.shape[0] and flags[i] else None


# --------------------------------------------------------------------------------------------
# GRAIL .gra
# --------------------------------------------------------------------------------------------
def parse_gra(data: bytes) -> pa.Table:
    """Parse the text of a GRAIL ``.gra`` file (see :func:`read_edges`).

    >>> t = parse_gra(b"graph_for_greach\\n2\\n0: 1 #\\n1: #\\n")
    >>> t.to_pydict(), t.schema.metadata
    ({'src': [0], 'dst': [1]}, {b'grail.vertices': b'2'})
    """
    n, offset = _gra_header(data)
    try:
        src, dst = _gra_body(data, offset, n)
    except _LineError as exc:
        raise EdgeInputError(f"malformed .gra file: line {exc.line + 3} {exc.what}") from None
    return edge_table(src, dst, n)


def _gra_header(data: bytes) -> tuple[int, int]:
    """The vertex count of line 2 and the offset of the adjacency text; checks line 1."""
    end1 = data.find(b"\n")
    end2 = data.find(b"\n", end1 + 1) if end1 >= 0 else -1
    first = data[:end1 if end1 >= 0 else 64].strip()
    if first != _GRA_MAGIC:
        shown = first[:40].decode("utf-8", "replace")
        raise EdgeInputError(
            f"not a GRAIL .gra file: line 1 is {shown!r}, expected 'graph_for_greach' "
            "(pass fmt= to read it as another format)"
        )
    count = data[end1 + 1:end2 if end2 >= 0 else len(data)].strip()
    if not count.isdigit():
        shown = count[:40].decode("utf-8", "replace")
        raise EdgeInputError(f"malformed .gra header: line 2 must be the vertex count, got {shown!r}")
    return int(count), (end2 + 1 if end2 >= 0 else len(data))


def _gra_body(data: bytes, offset: int, n: int) -> tuple[np.ndarray, np.ndarray]:
    """Edge arrays of the adjacency lines ``u: v1 v2 ... #`` (every line checked)."""
    lx = _Lexed(data, offset, {58: _COLON, 35: _HASH}, signed=False)
    _check_gra_grammar(lx)
    num = np.flatnonzero(lx.kind == _NUM)
    is_src = lx.kind[num + 1] == _COLON                   # the number before ':' is the vertex
    owners = lx.values[is_src]
    owner_of = np.cumsum(is_src, dtype=np.int64)[~is_src] - 1
    src, dst = owners[owner_of], lx.values[~is_src]
    _check_range(owners, lx.line[num[is_src]], n)
    _check_range(dst, lx.line[num[~is_src]], n)
    if lx.lines != n:
        raise EdgeInputError(
            f"malformed .gra file: the header says {n} vertices but the file has {lx.lines} "
            "adjacency lines (one 'u: v1 v2 ... #' line per vertex)"
        )
    return src, dst


def _check_gra_grammar(lx: _Lexed) -> None:
    """Every line is ``NUM ':' NUM* '#'``; raises _LineError at the first line that is not."""
    k = lx.kind
    bad = _first(k == _BAD)
    if bad is not None:
        raise _LineError(int(lx.line[bad]), "holds a character that is not a digit, ':' or '#'")
    line_start = np.ones(k.shape[0], bool)
    line_start[1:] = k[:-1] == _NL
    second = np.zeros_like(line_start)
    second[1:] = line_start[:-1] & (k[:-1] != _NL)
    last = np.zeros_like(line_start)
    last[:-1] = (k[1:] == _NL) & (k[:-1] != _NL)
    wrong = ((line_start & (k != _NUM)) | (second & (k != _COLON)) | ((k == _COLON) & ~second)
             | (last & (k != _HASH)) | ((k == _HASH) & ~last))
    i = _first(wrong)
    if i is not None:
        raise _LineError(int(lx.line[i]), "is not of the form 'u: v1 v2 ... #'")


def _check_range(ids: np.ndarray, lines: np.ndarray, n: int) -> None:
    """Vertex ids of a .gra file lie in 0..n-1."""
    i = _first((ids < 0) | (ids >= n))
    if i is not None:
        raise _LineError(int(lines[i]), f"names vertex {int(ids[i])}, outside 0..{n - 1}")


# --------------------------------------------------------------------------------------------
# SNAP edge lists
# --------------------------------------------------------------------------------------------
def parse_snap(data: bytes) -> pa.Table:
    """Parse a SNAP edge list: ``src dst`` integers per line, ``#`` starts a comment.

    Blank and comment lines are skipped; columns after the second (weights, timestamps) are
    ignored. A plain list (comments only at the top, one tab or space between the fields) is
    read by pyarrow.csv; anything else, and every malformed file, by the NumPy lexer, which
    names the line at fault.

    >>> parse_snap(b"# a comment\\n1\\t2\\n\\n2 3 0.5\\n").to_pydict()
    {'src': [1, 2], 'dst': [2, 3]}
    """
    if not data or data.isspace():
        empty = np.empty(0, np.int64)
        return edge_table(empty, empty)
    fast = _plain_snap(data)
    if fast is not None:
        return fast
    data = _blank_comments(data)
    try:
        lx = _Lexed(data, 0, {}, signed=True)
        src, dst = _snap_columns(lx)
    except _LineError as exc:
        raise EdgeInputError(
            f"malformed edge list: line {exc.line + 1} {exc.what} (SNAP edge lists hold two "
            "integers per line; read text keys from a .tsv/.csv file)"
        ) from None
    return edge_table(src, dst)


def _plain_snap(data: bytes) -> pa.Table | None:
    """The fast path of :func:`parse_snap`, or None where the file is not a plain list.

    Plain: ``#`` lines only before the first edge, and the first edge line is two integers
    with exactly one tab or space between them. pyarrow.csv then parses the rest with that
    delimiter and int64 columns; any complaint sends the file to the NumPy lexer instead.
    """

    offset = 0
    while data.startswith(b"#", offset) or data.startswith(b"\n", offset):
        end = data.find(b"\n", offset)
        if end < 0:
            return None
        offset = end + 1
    end = data.find(b"\n", offset)
    first = data[offset:end if end >= 0 else len(data)].rstrip(b"\r")
    delimiter = "\t" if first.count(b"\t") >= 1 else " "
    fields = first.split(delimiter.encode())
    if len(fields) < 2 or not all(f.lstrip(b"-").isdigit() for f in fields[:2]) \
            or data.find(b"#", offset) >= 0:
        return None
    read = pacsv.ReadOptions(autogenerate_column_names=True, skip_rows=0)
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


def _blank_comments(data: bytes) -> bytes:
    """The text with every ``#`` ... end-of-line replaced by spaces (newlines kept)."""
    if b"#" not in data:
        return data
    b = np.frombuffer(data, np.uint8).copy()
    hashes = np.flatnonzero(b == 35)
    newlines = np.append(np.flatnonzero(b == 10), b.shape[0])   # the end closes the last line
    ends = newlines[np.searchsorted(newlines, hashes)]
    depth = np.zeros(b.shape[0] + 1, np.int32)
    np.add.at(depth, hashes, 1)
    np.add.at(depth, ends, -1)
    b[np.cumsum(depth[:-1]) > 0] = 32
    return b.tobytes()


def _rank_in_line(line: np.ndarray, num: np.ndarray) -> np.ndarray:
    """For each symbol: how many numbers precede it on its line."""
    before = np.cumsum(num, dtype=np.int64) - num
    opens = np.ones(line.shape[0], bool)                   # every line has a symbol (its NL)
    opens[1:] = line[1:] != line[:-1]
    first_of_line = np.flatnonzero(opens)                  # indexed by line number
    return before - before[first_of_line[line]]


def _snap_columns(lx: _Lexed) -> tuple[np.ndarray, np.ndarray]:
    """The first two numbers of every non-blank line, checked; later fields are ignored.

    A line must hold two integers, each ended by white space; whatever follows the second
    (a weight such as ``0.5``) is not looked at.
    """
    num = lx.kind == _NUM
    rank = _rank_in_line(lx.line, num)
    bad = _first((lx.kind == _BAD) & (rank < 2))
    if bad is not None:
        raise _LineError(int(lx.line[bad]), "holds a character that is not part of an integer")
    rank, lines = rank[num], lx.line[num]
    ragged = _first((rank < 2) & ~lx.clean_end)
    if ragged is not None:
        raise _LineError(int(lines[ragged]), "holds a field that is not an integer")
    per_line = np.bincount(lines, minlength=lx.lines)
    lonely = _first(per_line == 1)
    if lonely is not None:
        raise _LineError(lonely, "holds one number, not two (source and destination)")
    return lx.values[rank == 0], lx.values[rank == 1]


# --------------------------------------------------------------------------------------------
# CSV / TSV
# --------------------------------------------------------------------------------------------
def parse_delimited(data: bytes, delimiter: str, src_col=None, dst_col=None,
                    header: bool | None = None) -> pa.Table:
    """Parse CSV/TSV text with pyarrow.csv (see :func:`read_edges` for the header rule).

    >>> parse_delimited(b"a,b\\nx,y\\n", ",").to_pydict()
    {'src': ['x'], 'dst': ['y']}
    """
    if header is None:
        header = src_col is not None or dst_col is not None or _looks_like_header(data, delimiter)
    if not header and (src_col is not None or dst_col is not None):
        raise EdgeInputError("src_col/dst_col name header columns, but header=False was given")
    names = _header_names(data, delimiter) if header else None
    src, dst = _pick_columns(names, src_col, dst_col) if header else ("f0", "f1")
    try:                                                   # integer keys: parsed directly
        return edge_table(*_read_csv(data, delimiter, header, src, dst, pa.int64()))
    except pa.ArrowInvalid:                                # some field is not an integer
        pass
    return edge_table(*_text_or_int(*_read_csv(data, delimiter, header, src, dst, pa.string())))


def _read_csv(data: bytes, delimiter: str, header: bool, src: str, dst: str, typ):
    """The two key columns as ``typ``; a ragged row is an EdgeInputError naming its line.

    Raises ``pa.ArrowInvalid`` when a field does not convert to ``typ``.
    """

    invalid: list = []
    read = pacsv.ReadOptions(autogenerate_column_names=not header)
    parse = pacsv.ParseOptions(delimiter=delimiter, invalid_row_handler=_collect(invalid))
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


def _collect(sink: list):
    """An invalid-row handler that remembers each bad row and skips it (reported afterwards)."""
    def handler(row):
        sink.append(row)
        return "skip"
    return handler


def _describe_row(data: bytes, row) -> str:
    """'line N has k fields, expected m: <text>' for a row pyarrow.csv refused."""
    number = row.number
    if number is None:                                       # parallel parsing: find the text
        at = data.find(row.text.encode())
        number = data.count(b"\n", 0, at) + 1 if at >= 0 else "?"
    return (f"line {number} has {row.actual_columns} fields, expected {row.expected_columns}: "
            f"{row.text[:80]!r}")


def _first_rows(data: bytes, delimiter: str, rows: int = 2) -> list[list[str]]:
    """The fields of the first non-empty rows (a cheap look, for the header decision)."""
    out = []
    for line in data[:1 << 16].splitlines():
        text = line.decode("utf-8", "replace").strip()
        if text:
            out.append([f.strip().strip('"') for f in text.split(delimiter)])
        if len(out) == rows:
            break
    return out


def _is_int(field: str) -> bool:
    return field.lstrip("+-").isdigit()


def _looks_like_header(data: bytes, delimiter: str) -> bool:
    """A header unless the first row's first two fields are integers."""
    rows = _first_rows(data, delimiter)
    if not rows or all(_is_int(f) for f in rows[0][:2]):
        return False
    return True


def _header_names(data: bytes, delimiter: str) -> list[str]:
    rows = _first_rows(data, delimiter, 1)
    if not rows:
        raise EdgeInputError(f"the {_kind(delimiter)} file is empty: no header row")
    return rows[0]


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


def _text_or_int(*cols) -> list[pa.Array]:
    """Text key columns as int64 when every value of both is an integer, else as string."""
    cols = [pc.utf8_trim_whitespace(c) for c in cols]
    try:
        return [pc.cast(c, pa.int64()) for c in cols]
    except (pa.ArrowInvalid, pa.ArrowNotImplementedError):
        return cols


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
    m = _DUCKDB_TARGET.match(target)
    if m is None:
        raise EdgeInputError(f"name a DuckDB table as 'file.duckdb:table', got {target!r}")
    db, table = _existing(m.group("db")), m.group("table")
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
