"""Names that arrive as strings (tables, columns, index names), parsed with sqlglot and
re-rendered quoted, so that a name can never carry SQL.

>>> quote_table('main.cites')
'"main"."cites"'
>>> quote_table('x; DROP TABLE y')
Traceback (most recent call last):
...
grail_duckdb.errors.EdgeInputError: 'x; DROP TABLE y' is not a table name ...
"""
from __future__ import annotations

import re

import sqlglot
from sqlglot import exp
from sqlglot.errors import ParseError, TokenError

from ..errors import EdgeInputError, GrailError

__all__ = ["DIALECT", "index_name", "index_name_of", "plain_table", "quote_column",
           "quote_identifier", "quote_table", "readable", "sql_string", "table_leaf",
           "table_parts", "column_name"]

DIALECT = "duckdb"
_INDEX_NAME = re.compile(r"^[A-Za-z0-9_][A-Za-z0-9_\-]*$")
_SIMPLE = re.compile(r"^[a-z_][a-z0-9_]*$")


def _parse_name(text: str, into, what: str):
    if not isinstance(text, str) or not text.strip():
        raise EdgeInputError(f"{text!r} is not a {what} name")
    try:
        node = sqlglot.parse_one(text, into=into, dialect=DIALECT)
    except (ParseError, TokenError):
        node = None
    if node is None:
        raise EdgeInputError(f"{text!r} is not a {what} name (quote names with spaces or "
                             f"symbols in double quotes, e.g. '\"my {what}\"')")
    return node


def quote_identifier(name: str) -> str:
    """Any string as one quoted DuckDB identifier (quotes inside doubled), never parsed as SQL.

    >>> quote_identifier('my "odd" table')
    '"my ""odd"" table"'
    """
    return exp.to_identifier(name, quoted=True).sql(DIALECT)


def sql_string(text: str) -> str:
    """A SQL string literal of ``text`` (quotes doubled).

    >>> sql_string("it's")
    "'it''s'"
    """
    return "'" + str(text).replace("'", "''") + "'"


def column_name(quoted: str) -> str:
    """A quoted column name as the user reads it.

    >>> column_name('"Citing Paper"')
    'Citing Paper'
    """
    return _parse_name(quoted, exp.Column, "column").name


def readable(quoted: str) -> str:
    """A quoted (dotted) name without the quotes where none are needed, for messages and
    statements a user pastes.

    >>> readable('"main"."cites"'), readable('"My Edges"')
    ('main.cites', '"My Edges"')
    """
    parts = table_parts(quoted)
    if all(_SIMPLE.match(p) for p in parts):
        return ".".join(parts)
    return quoted


def plain_table(name: str) -> str:
    """A table name as its parts joined by dots, unquoted (for summaries and messages).

    >>> plain_table('"My Edges"')
    'My Edges'
    """
    return ".".join(table_parts(name))


def table_parts(name: str) -> list[str]:
    """The parts (catalog, schema, table) of a table name written as SQL, unquoted."""
    node = _parse_name(name, exp.Table, "table")
    parts = node.parts
    if not parts or not all(isinstance(p, exp.Identifier) for p in parts) or node.alias:
        raise EdgeInputError(f"{name!r} is not a table name (quote names with spaces or symbols "
                             "in double quotes, e.g. '\"my table\"')")
    return [p.name for p in parts]


def quote_table(name: str) -> str:
    """A table name (``t``, ``schema.t``, ``"my table"``) as quoted SQL; anything else is an
    :class:`EdgeInputError`."""
    return ".".join(quote_identifier(p) for p in table_parts(name))


def table_leaf(name: str) -> str:
    """The last part of a table name: ``main.cites`` -> ``cites``."""
    return table_parts(name)[-1]


def quote_column(name: str) -> str:
    """A column name (``citing`` or ``"Citing Paper"``) as one quoted identifier.

    >>> quote_column('citing')
    '"citing"'
    """
    node = _parse_name(name, exp.Column, "column")
    if not isinstance(node, exp.Column) or node.table or not isinstance(node.this, exp.Identifier):
        raise EdgeInputError(f"{name!r} is not a column name (quote names with spaces or symbols "
                             "in double quotes)")
    return quote_identifier(node.this.name)


def index_name(name: str) -> str:
    """Check an index name: letters, digits, ``_`` and ``-`` (it becomes part of a file name).

    >>> index_name('cites')
    'cites'
    """
    if not isinstance(name, str) or not _INDEX_NAME.match(name):
        raise GrailError(f"{name!r} cannot name an index: use letters, digits, '_' and '-' "
                         "(pass name := '...' to grail_index)")
    return name


def index_name_of(text: str) -> str:
    """An index name made of any text: other characters become ``_``.

    >>> index_name_of('s2.my edges')
    's2_my_edges'
    """
    out = re.sub(r"[^A-Za-z0-9_\-]", "_", text)
    return out if _INDEX_NAME.match(out) else "_" + out
