"""Whether an index still describes its edge table.

Three levels, cheapest first, each exact about what it claims:

1. **Nothing was written.** DuckDB counts every statement that writes anything in the database
   instance (:func:`.duckdb_api.catalog_version`, a counter read: well under a microsecond). While it has not
   moved since an index was last verified, the index is fresh at no cost: this is what almost
   every statement (and every chunk of the per-chunk path) pays.
2. **This table was not replaced, altered, grown or shrunk.** After a write anywhere, the edge
   table's object id, estimated size, definition and row count (catalog metadata, about a
   millisecond) are compared with the ones recorded when the index was last verified: any
   difference (INSERT, DELETE, CREATE OR REPLACE, ALTER) makes the index stale.
3. **Its content did not change.** When they all match, an UPDATE may still have changed rows, so
   the content check decides: the row count and the sum of DuckDB's ``hash(src, dst)`` over the
   table (one scan; 150-210 ms for 16.5M edges on a 2-core machine), compared with the build's.

The content check is also what a persisted index is loaded against; when the DuckDB version
differs from the one that built it (``hash`` may differ), the engine's own content fingerprint
of the current table is compared instead.
"""
from __future__ import annotations

import duckdb
import pyarrow as pa

from ..engine.build import edges_fingerprint
from ..engine.index import load_index
from ..indexfile import read_metadata
from ..errors import EdgeInputError, StaleIndexError
from . import duckdb_api
from .names import readable, sql_string

__all__ = ["load_checked", "read_edge_table", "same_check", "signals", "stale_error",
           "table_check"]

_INT_TYPES = {"TINYINT", "SMALLINT", "INTEGER", "BIGINT", "UTINYINT", "USMALLINT",
              "UINTEGER", "UBIGINT"}


def load_checked(cur, name, path, qtable, qsrc, qdst, side, rebuild_sql, check=None):
    """Load a persisted index after checking that its edge table did not change.

    The cheap check (row count + hash sum, same DuckDB version) decides when it can; otherwise
    the engine's full content fingerprint of the current table is compared on load.
    Returns ``(index, check)``.
    """
    check = check or table_check(cur, qtable, qsrc, qdst)
    meta = read_metadata(path)
    cheap_ok = (side.get("duckdb") == check["duckdb"]
                and side.get("fingerprint") == meta.fingerprint)
    if cheap_ok:
        if not same_check(side, check):
            raise stale_error(name, qtable, rebuild_sql)
        index = load_index(path)
    else:
        fp = edges_fingerprint(read_edge_table(cur, qtable, qsrc, qdst))
        try:
            index = load_index(path, expect_fingerprint=fp)
        except StaleIndexError:
            raise stale_error(name, qtable, rebuild_sql) from None
    return index, check


def stale_error(name: str, qtable: str, rebuild_sql: str) -> StaleIndexError:
    """The error for a stale index, with the statement that rebuilds it (pasteable)."""
    return StaleIndexError(
        f"the reachability index {name!r} is stale: the edge table {readable(qtable)} "
        f"changed since it was built (committed INSERT, UPDATE, DELETE or replacement); rebuild "
        f"it with {rebuild_sql} (or build it with auto_rebuild := true to rebuild on change)")


def same_check(a: dict, b: dict) -> bool:
    return int(a["rows"]) == int(b["rows"]) and str(a["hash"]) == str(b["hash"])


def table_check(cur, qtable: str, qsrc: str, qdst: str) -> dict:
    """Row count and the sum of DuckDB's ``hash(src, dst)`` over the edge table: one scan.

    Also the place where a missing table or column, or an unsupported key type, gets its error
    message (in DuckDB's type names)."""
    try:
        rel = cur.sql(f"SELECT {qsrc}, {qdst} FROM {qtable}")
        types = rel.types
    except duckdb.CatalogException as exc:
        raise EdgeInputError(
            f"grail_index: no table or view {qtable} (indices read tables "
            f"through another connection of this database, so TEMP tables and uncommitted rows "
            f"are not visible): {_first_line(exc)}") from None
    except duckdb.BinderException as exc:
        raise EdgeInputError(
            f"grail_index: {qtable} has no column {qsrc} or {qdst}; name the "
            f"endpoint columns with src := '...' and dst := '...' ({_first_line(exc)})") from None
    for col, typ in zip((qsrc, qdst), types):
        _check_key_type(qtable, col, typ)
    rows, h = cur.execute(
        f"SELECT count(*), coalesce(sum(hash({qsrc}, {qdst})), 0)::VARCHAR FROM {qtable}"
    ).fetchall()[0]
    return {"rows": int(rows), "hash": str(h), "duckdb": duckdb.__version__}


def _check_key_type(qtable: str, col: str, typ) -> None:
    """Integer or VARCHAR keys without a collation; anything else is refused by its DuckDB
    name (a HUGEINT column is 'HUGEINT', not Arrow's 'decimal128(38,0)')."""
    name = str(typ)
    if name == "VARCHAR":
        collation = duckdb_api.collation(typ)
        if collation:
            raise EdgeInputError(
                f"grail_index: column {col} of {qtable} has collation "
                f"{collation}; the index compares keys byte for byte, while DuckDB compares "
                f"them under {collation}: index a view of normalised keys instead, e.g. "
                f"CREATE VIEW v AS SELECT lower(src) AS src, lower(dst) AS dst FROM t, and "
                f"query it with lower(...) keys")
        return
    if name not in _INT_TYPES and name != '"NULL"':
        raise EdgeInputError(
            f"grail_index: column {col} of {qtable} is {name}; vertex keys must "
            f"be an integer type up to 64 bits (TINYINT .. BIGINT, UTINYINT .. UBIGINT) or "
            f"VARCHAR: index a view that casts it, e.g. CAST({col} AS VARCHAR)")


def _first_line(exc) -> str:
    return str(exc).splitlines()[0]


def read_edge_table(cur, qtable: str, qsrc: str, qdst: str) -> pa.Table:
    """The two endpoint columns of an edge table as Arrow (columns src, dst)."""
    return cur.sql(f"SELECT {qsrc} AS src, {qdst} AS dst FROM {qtable}").to_arrow_table()



def signals(cur, where: tuple | None, qtable: str) -> tuple | None:
    """Catalog metadata of the edge table that changes with every INSERT, DELETE, replacement
    and ALTER (not with UPDATE): object id, estimated size, definition, row count. None for a
    view or an unknown object (its content check decides alone)."""
    if where is None or where[3] != "table":
        return None
    d, s, t, _ = where
    row = cur.execute(
        f"SELECT table_oid, estimated_size, sql FROM duckdb_tables() WHERE database_name = "
        f"{sql_string(d)} AND schema_name = {sql_string(s)} AND table_name = {sql_string(t)}"
    ).fetchall()
    if not row:
        return ("missing",)
    count = cur.execute(f"SELECT count(*) FROM {qtable}").fetchall()[0][0]
    return (*row[0], int(count))
