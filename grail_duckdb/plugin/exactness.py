"""Which statements the rewriter may take: only those whose rewritten form returns exactly the
rows of the statement as written.

The rewritten form runs a statement in several (fetch the sources, answer, run the rest over
the copies), evaluated when it is called. That is exact for a read-only query whose parts give
the same rows whenever they are evaluated, and for ``CREATE TABLE ... AS`` / ``INSERT ...
SELECT`` of such a query (they store its rows). Everything else runs as written, per chunk:

* DDL that stores a statement (``CREATE VIEW``, ``CREATE MACRO``, ...): its text must be the
  user's, not one naming the plugin's temporary copies; ``PREPARE``, ``EXPLAIN`` and other
  commands likewise (:func:`parsable` keeps them from the parser altogether);
* UPDATE and DELETE (their conditions read the rows they change);
* a statement that writes while it reads (a sequence's ``nextval``: DuckDB's binder says so);
* a statement that calls a volatile function (``random()``, ``uuid()``, ...) or reads the
  clock (``now()``, ``current_timestamp``; the parts of the rewritten form run at different
  moments), in its own text or in a view or macro it names;
* grouping sets (``ROLLUP``, ``CUBE``, ``GROUPING SETS``): a super-aggregate row has no one
  source row whose answer it could take;
* relations (``con.sql()``): DuckDB evaluates them when they are fetched, the rewritten form
  would be a snapshot taken when they were made (:mod:`.statements` never rewrites them).
"""
from __future__ import annotations

import re

import duckdb
import sqlglot
from sqlglot import exp
from sqlglot.errors import TokenError
from sqlglot.tokens import TokenType

from .names import DIALECT

__all__ = ["CLOCK", "definitions", "names_in", "parsable", "query_part", "static_refusal",
           "volatile_calls"]

#: functions (and keywords) whose value depends on when the statement runs
CLOCK = frozenset({
    "now", "current_date", "current_time", "current_timestamp", "current_localtime",
    "current_localtimestamp", "localtime", "localtimestamp", "get_current_time",
    "get_current_timestamp", "transaction_timestamp", "today", "txid_current",
    "current_transaction_id", "current_query", "current_query_id"})
#: volatile for DuckDB, yet the same rows whenever evaluated: ``error`` raises or returns nothing
_SAME_ROWS = frozenset({"error"})
#: the first word of the statements the rewriter parses
_FIRST = re.compile(r"(?is)^(?:\s+|--[^\n]*(?:\n|$)|/\*.*?\*/)*"
                    r"(\(|select\b|with\b|from\b|values\b|table\b|create\b|insert\b)")
_NOT_NAMES = (TokenType.STRING, TokenType.NUMBER, TokenType.NATIONAL_STRING)
_QUERY = (exp.Query,)


def parsable(query: str) -> bool:
    """Whether the statement may be one the rewriter takes (a query, CREATE, INSERT), judged
    by its first word: others are never parsed (sqlglot would warn about them on stderr).

    >>> parsable("  -- a comment\\nSELECT 1"), parsable("EXPLAIN SELECT 1"), parsable("PREPARE p AS SELECT 1")
    (True, False, False)
    """
    return _FIRST.match(query) is not None


def static_refusal(tree) -> str | None:
    """Why a parsed statement runs as written whatever the database holds, or None.

    >>> import sqlglot
    >>> static_refusal(sqlglot.parse_one("CREATE VIEW v AS SELECT 1", dialect="duckdb"))
    'DDL is stored as written'
    >>> static_refusal(sqlglot.parse_one("SELECT a FROM t GROUP BY ROLLUP (a)", dialect="duckdb"))
    'grouping sets'
    """
    if isinstance(tree, exp.Create):
        if (tree.kind or "").upper() != "TABLE" or not isinstance(tree.expression, _QUERY):
            return "DDL is stored as written"
    elif isinstance(tree, exp.Insert):
        if not isinstance(tree.expression, _QUERY):
            return "an INSERT of values"
    elif not isinstance(tree, _QUERY):
        return "not a query"
    if tree.find(exp.Rollup, exp.Cube, exp.GroupingSets):
        return "grouping sets"
    return None


def query_part(tree):
    """The read-only query inside a statement the rewriter takes (itself for a query)."""
    return tree.expression if isinstance(tree, (exp.Create, exp.Insert)) else tree


def volatile_calls(con, text: str, execute) -> list[str]:
    """The volatile and clock functions the statement calls, in its text or in the views and
    macros it names (transitively), by name; ``execute(con, sql)`` runs catalog queries."""
    volatile = {r[0] for r in execute(con, "SELECT DISTINCT lower(function_name) FROM "
                                           "duckdb_functions() WHERE stability = 'VOLATILE'"
                                      ).fetchall()} - _SAME_ROWS | CLOCK
    words = set()
    for body in definitions(con, text, execute):
        words |= names_in(body)
    return sorted(words & volatile)


def names_in(text: str) -> set[str]:
    """The words of a SQL text outside its string literals, lower case.

    >>> sorted(names_in("SELECT now() FROM t WHERE x = 'random'"))
    ['from', 'now', 'select', 't', 'where', 'x']
    """
    try:
        tokens = sqlglot.Dialect.get_or_raise(DIALECT).tokenize(text)
    except (TokenError, ValueError):
        return set(re.findall(r"[a-z_][a-z0-9_]*", text.lower()))
    return {t.text.lower() for t in tokens
            if t.token_type not in _NOT_NAMES and (t.text[:1].isalnum() or t.text[:1] == "_")}


def definitions(con, text: str, execute) -> list[str]:
    """``text`` and the SQL of every view and user macro it names, transitively (by name:
    an object of that name in any schema counts, which can only find more)."""
    bodies: dict[str, list] = {}
    try:
        rows = execute(con, "SELECT lower(view_name), sql FROM duckdb_views() WHERE NOT internal "
                            "UNION ALL SELECT lower(function_name), macro_definition FROM "
                            "duckdb_functions() WHERE NOT internal AND macro_definition IS NOT "
                            "NULL").fetchall()
    except duckdb.Error:
        rows = []
    for name, body in rows:
        bodies.setdefault(name, []).append(body or "")
    out, seen, todo = [], set(), [text]
    while todo:
        body = todo.pop()
        out.append(body)
        for word in names_in(body) - seen:
            seen.add(word)
            todo += bodies.get(word, [])
    return out
