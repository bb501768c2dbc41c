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
from .sqlfiles import macro_names

__all__ = ["CLOCK", "OWN_MACROS", "calls_in", "definitions", "names_in", "parsable",
           "static_refusal", "volatile_calls"]

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

    >>> parsable("  -- a comment\\nSELECT 1"), parsable("EXPLAIN SELECT 1")
    (True, False)
    >>> parsable("PREPARE p AS SELECT 1")
    False
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


def volatile_calls(con, text: str, execute) -> list[str]:
    """The volatile and clock functions the statement calls, in its text or in the views and
    user macros it names (transitively), by name; ``execute(con, sql)`` runs catalog queries.
    DuckDB's own functions are looked up once per process; a user function (not one of the
    plugin's macros) costs one look-up of the function catalog."""
    builtin, volatile = _builtins(con, execute)
    views = _bodies(con, execute, "SELECT lower(view_name), sql FROM duckdb_views() "
                                  "WHERE NOT internal")
    seen, looked_up, todo, found, users = set(), set(), [text], set(), set()
    while todo:
        body = todo.pop()
        words, calls = names_in(body), calls_in(body)
        found |= (calls & volatile) | (words & CLOCK)
        users |= calls - builtin - OWN_MACROS
        for word in words - seen:
            seen.add(word)
            todo += views.get(word, [])
        fresh = users - looked_up if not todo else set()
        if fresh:
            looked_up |= fresh
            for name, stability, macro in _user_functions(con, execute, fresh):
                if stability == "VOLATILE":
                    found.add(name)
                if macro:
                    todo.append(macro)
    return sorted(found)


#: the macros the plugin installs (sql/grail.sql): their bodies are the plugin's, and only
#: grail_index (which builds) has effects
OWN_MACROS = macro_names()
_BUILTINS: dict = {}


def _builtins(con, execute) -> tuple[frozenset, frozenset]:
    """DuckDB's own function names and the volatile ones among them (once per process:
    the function catalog is slow to list, and its built-in part never changes)."""
    if not _BUILTINS:
        rows = execute(con, "SELECT lower(function_name), bool_or(stability = 'VOLATILE') "
                            "FROM duckdb_functions() WHERE internal GROUP BY ALL").fetchall()
        _BUILTINS["volatile"] = frozenset(r[0] for r in rows if r[1]) - _SAME_ROWS | CLOCK
        _BUILTINS["names"] = frozenset(r[0] for r in rows)
    return _BUILTINS["names"], _BUILTINS["volatile"]


def _user_functions(con, execute, names: set) -> list:
    """``(name, stability, macro body)`` of the user functions and macros of these names."""
    listed = ", ".join("'" + n.replace("'", "''") + "'" for n in sorted(names))
    try:
        return execute(con, "SELECT lower(function_name), stability, macro_definition FROM "
                            "duckdb_functions() WHERE NOT internal AND lower(function_name) "
                            f"IN ({listed})").fetchall()
    except duckdb.Error:
        return []


def _bodies(con, execute, sql: str) -> dict:
    """``{lower-case name: [SQL bodies]}`` of a catalog query of (name, body) rows."""
    out: dict = {}
    try:
        rows = execute(con, sql).fetchall()
    except duckdb.Error:
        rows = []
    for name, body in rows:
        out.setdefault(name, []).append(body or "")
    return out


def calls_in(text: str) -> set[str]:
    """The names a SQL text calls (a name followed by a parenthesis), lower case.

    >>> sorted(calls_in("SELECT random() + abs(x), 'f(1)' FROM range(3) AS t(a)"))
    ['abs', 'random', 'range', 't']
    """
    try:
        tokens = sqlglot.Dialect.get_or_raise(DIALECT).tokenize(text)
    except (TokenError, ValueError):
        return {m.lower() for m in re.findall(r"([A-Za-z_][A-Za-z0-9_]*)\s*\(", text)}
    return {a.text.lower() for a, b in zip(tokens, tokens[1:])
            if b.token_type == TokenType.L_PAREN and a.token_type not in _NOT_NAMES
            and (a.text[:1].isalnum() or a.text[:1] == "_")}


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
