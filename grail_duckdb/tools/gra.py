"""The GRAIL ``.gra`` format -> an edge Table, parsed by whole-array NumPy passes.

A ``.gra`` file is line 1 ``graph_for_greach``, line 2 the vertex count n, then exactly n lines
``u: v1 v2 ... #`` listing the out-neighbours of vertex u (0-based). DuckDB's CSV reader has
no grammar for these variable-length lists: read as lines and split in SQL it is slower than
the passes here, so this one format keeps its own parser. One pass
classifies every byte, the symbols (numbers, ``:``, ``#``, newlines) are checked against the
line grammar all at once, and the numbers are decoded by Arrow's integer parser; a malformed
line is named by its number.
"""
from __future__ import annotations

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from ..engine.ingest import edge_table
from ..errors import EdgeInputError

__all__ = ["parse_gra", "GRA_MAGIC"]

GRA_MAGIC = b"graph_for_greach"
#: int64 holds every 18-digit decimal number
_MAX_DIGITS = 18
_NUM, _COLON, _HASH, _NL, _BAD = 1, 2, 3, 4, 5
_WHITE = b" \t\r\x0b\x0c"


def parse_gra(data: bytes) -> pa.Table:
    """Parse the text of a GRAIL ``.gra`` file; the vertex count travels in the schema
    metadata (``grail.vertices``), so vertices without edges are vertices of the index.

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


class _LineError(Exception):
    """A grammar violation at a 0-based line of the adjacency text (-> EdgeInputError)."""

    def __init__(self, line: int, what: str):
        super().__init__(what)
        self.line, self.what = line, what


def _gra_header(data: bytes) -> tuple[int, int]:
    """The vertex count of line 2 and the offset of the adjacency text; checks line 1."""
    end1 = data.find(b"\n")
    end2 = data.find(b"\n", end1 + 1) if end1 >= 0 else -1
    first = data[:end1 if end1 >= 0 else 64].strip()
    if first != GRA_MAGIC:
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


def _symbol_table() -> np.ndarray:
    """Byte -> symbol code: 0 for digits and white space, ':' '#' newline, _BAD otherwise."""
    table = np.full(256, _BAD, np.uint8)
    table[48:58] = 0
    table[list(_WHITE)] = 0
    table[58], table[35], table[10] = _COLON, _HASH, _NL
    return table


class _Lexed:
    """The symbols of the adjacency text in order: kind (``_NUM`` ...), line (0-based), and
    ``values``, the decoded numbers (one per ``_NUM`` symbol). Trailing blank lines are
    dropped and the symbols always end with a newline. Each byte is touched by a handful of
    whole-array passes; the rest works on the (far fewer) symbols."""

    def __init__(self, data: bytes, offset: int):
        b = np.frombuffer(data, np.uint8, offset=offset)
        digit = np.zeros(b.shape[0] + 1, bool)            # a False sentinel ends every run
        np.less(b - np.uint8(48), 10, out=digit[:-1])
        start = np.empty(b.shape[0], bool)
        start[:1] = digit[:1]
        np.greater(digit[1:-1], digit[:-2], out=start[1:])  # a digit after a non-digit
        kind = _symbol_table()[b]
        kind |= start.view(np.uint8)                      # _NUM == 1; digits are 0 in kind
        pos = np.flatnonzero(kind)
        sym = kind[pos]
        content = np.flatnonzero(sym != _NL)
        keep = int(content[-1]) + 1 if content.shape[0] else 0   # drop trailing blank lines
        if 0 < keep < sym.shape[0]:                        # keep the last line's newline
            self.kind = sym[:keep + 1]
        elif keep:                                         # unterminated: add the newline
            self.kind = np.append(sym, np.uint8(_NL))
        else:
            self.kind = sym[:0]
        is_nl = (self.kind == _NL).view(np.uint8)
        self.line = np.cumsum(is_nl, dtype=np.int32)
        self.line -= is_nl                                 # the newline belongs to its line
        self.lines = int(self.line[-1]) + 1 if keep else 0
        self.values, too_long = _decode_numbers(b, pos[sym == _NUM], digit)
        if too_long is not None:
            line = int(self.line[self.kind == _NUM][too_long])
            raise _LineError(line, "holds a number with more than 18 digits")


def _decode_numbers(b: np.ndarray, starts: np.ndarray, digit: np.ndarray):
    """Decimal values of the digit runs starting at ``starts``: the digits packed into one
    buffer are, with the run lengths as offsets, an Arrow string array that Arrow's integer
    parser decodes at once. Returns ``(int64 values, index of the first number with more
    than 18 digits or None)``."""
    ends = np.flatnonzero(digit[:-1] & ~digit[1:])
    lengths = ends - starts + 1
    too_long = _first(lengths > _MAX_DIGITS)
    if too_long is not None:
        return None, too_long
    offsets = np.zeros(starts.shape[0] + 1, np.int64)
    np.cumsum(lengths, out=offsets[1:])
    text = pa.LargeStringArray.from_buffers(starts.shape[0], pa.py_buffer(offsets),
                                            pa.py_buffer(b[digit[:-1]]))
    return pc.cast(text, pa.int64()).to_numpy(), None


def _first(flags: np.ndarray):
    """Index of the first True, or None."""
    i = int(np.argmax(flags)) if flags.shape[0] else 0
    return i if flags.shape[0] and flags[i] else None


def _gra_body(data: bytes, offset: int, n: int) -> tuple[np.ndarray, np.ndarray]:
    """Edge arrays of the adjacency lines ``u: v1 v2 ... #`` (every line checked)."""
    lx = _Lexed(data, offset)
    _check_grammar(lx)
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


def _check_grammar(lx: _Lexed) -> None:
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
