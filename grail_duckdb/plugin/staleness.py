"""Whether an index still describes its edge table, and what the index file records about it.

Two checks, both exact: the cheap one (row count and the sum of DuckDB's ``hash(src, dst)``
over the table, one scan) when the DuckDB version is the one that built the index, and else the
engine's full content fingerprint of the current table.
"""
from __future__ import annotations

from pathlib import Path

import duckdb
import pyarrow as pa

from ..engine.index import edges_fingerprint, load_index
from ..engine.persistence import read_metadata
from ..errors import EdgeInputError, IndexFileError, StaleIndexError

__all__ = ["SOURCE_VERSION", "load_checked", "read_edge_table", "read_source", "same_check",
           "stale_error", "table_check"]

SOURCE_VERSION = 1


def load_checked(cur, name, path, qtable, qsrc, qdst, side, check=None):
    """Load a persisted index after checking that its edge table did not change.

    The cheap check (row count + hash sum, same DuckDB version) decides when it can; otherwise
    the engine's full content fingerprint of the current table is compared on load.
    Returns ``(index, check)``.
    """
    check = check or table_check(cur, qtable, qsrc, qdst)
    meta = read_metadata(path)
    cheap_ok = (side.get("duckdb") == check["duckdb"]
                and side.get("fingerprint") == meta.get("fingerprint"))
    if cheap_ok:
        if not same_check(side, check):
            raise stale_error(name, qtable)
        index = load_index(path)
    else:
        fp = edges_fingerprint(read_edge_table(cur, qtable, qsrc, qdst))
        try:
            index = load_index(path, expect_fingerprint=fp)
        except StaleIndexError:
            raise stale_error(name, qtable) from None
    return index, check

def stale_error(name: str, qtable: str) -> StaleIndexError:
    return StaleIndexError(
        f"the reachability index {name!r} is stale: the edge table {qtable} changed since it was "
        f"built; rebuild it with SELECT grail_index('{qtable}', name := '{name}', "
        "rebuild := true) (with the same src/dst/labels arguments)")

def same_check(a: dict, b: dict) -> bool:
    return int(a["rows"]) == int(b["rows"]) and str(a["hash"]) == str(b["hash"])

def table_check(cur, qtable: str, qsrc: str, qdst: str) -> dict:
    """Row count and the sum of DuckDB's ``hash(src, dst)`` over the edge table: one scan.

    Also the place where a missing table or column gets its error message."""
    try:
        rows, h = cur.execute(
            f"SELECT count(*), coalesce(sum(hash({qsrc}, {qdst})), 0)::VARCHAR FROM {qtable}"
        ).fetchall()[0]
    except duckdb.CatalogException as exc:
        raise EdgeInputError(
            f"grail_index: no table or view {qtable} (indices read tables through another "
            f"connection of this database, so TEMP tables and uncommitted rows are not "
            f"visible): {_first_line(exc)}") from None
    except duckdb.BinderException as exc:
        raise EdgeInputError(
            f"grail_index: {qtable} has no column {qsrc} or {qdst}; name the endpoint columns "
            f"with src := '...' and dst := '...' ({_first_line(exc)})") from None
    return {"rows": int(rows), "hash": str(h), "duckdb": duckdb.__version__}

def _first_line(exc) -> str:
    return str(exc).splitlines()[0]

def read_edge_table(cur, qtable: str, qsrc: str, qdst: str) -> pa.Table:
    """The two endpoint columns of an edge table as Arrow (columns src, dst)."""
    return cur.sql(f"SELECT {qsrc} AS src, {qdst} AS dst FROM {qtable}").to_arrow_table()

def read_source(path: Path) -> dict:
    """What an index file records about its edge table; an index file without it (built
    outside SQL) or with a newer description is an :class:`IndexFileError`."""
    meta = read_metadata(path)
    doc = {k[len("source."):]: v for k, v in meta.items() if k.startswith("source.")}
    doc["fingerprint"] = meta.get("fingerprint")
    try:
        if int(doc.get("version", 0)) > SOURCE_VERSION:
            raise IndexFileError(f"{path} was written by a newer grail_duckdb; upgrade it")
        doc["labels"] = int(doc["labels"])
        for key in ("table", "src", "dst", "rows", "hash"):
            doc[key]
        return doc
    except IndexFileError:
        raise
    except (ValueError, KeyError, TypeError) as exc:
        raise IndexFileError(
            f"{path} does not say which edge table it was built from ({exc.__class__.__name__}: "
            f"{exc}); rebuild with grail_index(..., rebuild := true)") from None
