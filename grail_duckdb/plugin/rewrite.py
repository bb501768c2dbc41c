"""The rewrite of ``reaches(...)`` calls into the whole-column path, with sqlglot.

The per-chunk scalar calls of one SELECT become one engine call per column:

>>> print(rewrite("SELECT a, b FROM pairs WHERE reaches(a, b)"))
SELECT a, b FROM (SELECT UNNEST(__grail_rows, max_depth => 2), UNNEST(REACHES_LIST(__grail_s0, __grail_d0, '')) AS __grail_r0 FROM (SELECT LIST(__grail_t) AS __grail_rows, LIST(a) AS __grail_s0, LIST(b) AS __grail_d0 FROM pairs AS __grail_t)) AS pairs WHERE pairs.__grail_r0
"""
from __future__ import annotations

import sqlglot
from sqlglot import exp
from sqlglot.errors import ParseError, TokenError

from ..errors import GrailError
from .names import DIALECT

__all__ = ["columns_via", "rewrite"]

_PREFIX = "__grail_"


def _is_reaches(node) -> bool:
    return isinstance(node, exp.Anonymous) and node.name.lower() == "reaches"


def _own_calls(select: exp.Select) -> list[exp.Anonymous]:
    """The ``reaches`` calls whose nearest enclosing SELECT is ``select``."""
    return [n for n in select.find_all(exp.Anonymous)
            if _is_reaches(n) and n.find_ancestor(exp.Select) is select]


def _source(select: exp.Select):
    """The single FROM source (a table or a subquery) of a SELECT without joins, or None."""
    frm = select.args.get("from_") or select.args.get("from")
    if frm is None or select.args.get("joins") or select.args.get("laterals"):
        return None
    src = frm.this
    return src if isinstance(src, (exp.Table, exp.Subquery)) else None


def _rewritable(call: exp.Anonymous, names: set[str], columns) -> bool:
    """A call reads only the source: 2 or 3 arguments, a constant index name, columns of the
    source (qualified by its name or unqualified and known), no subqueries."""
    args = call.expressions
    if len(args) not in (2, 3):
        return False
    if len(args) == 3 and not (isinstance(args[2], exp.Literal) and args[2].is_string):
        return False
    for arg in args[:2]:
        if arg.find(exp.Select, exp.Subquery, exp.Star) or any(_is_reaches(n) for n in arg.find_all(exp.Anonymous)):
            return False
        for col in arg.find_all(exp.Column):
            if col.args.get("db") or col.args.get("catalog"):
                return False
            if col.table and col.table.lower() not in names:
                return False
            if not col.table and columns is not None and col.name.lower() not in columns:
                return False
    return True


def _rewrite_select(select: exp.Select, columns_of) -> None:
    """Rewrite one SELECT in place when every ``reaches`` call of it reads its single source."""
    calls = _own_calls(select)
    src = _source(select)
    if not calls or src is None:
        return
    alias = src.alias_or_name
    names = {alias.lower()}
    columns = columns_of(src.copy()) if columns_of else None
    if not all(_rewritable(c, names, columns) for c in calls):
        return
    inner_src = src.copy()
    inner_src.set("alias", exp.TableAlias(this=exp.to_identifier(_PREFIX + "t")))
    aggs = [exp.alias_(exp.func("list", exp.column(_PREFIX + "t")), _PREFIX + "rows")]
    outs = [exp.func("unnest", exp.column(_PREFIX + "rows"),
                     exp.Kwarg(this=exp.var("max_depth"), expression=exp.Literal.number(2)))]
    slot: dict[str, str] = {}
    for call in calls:
        key = call.sql(DIALECT)
        if key not in slot:
            k = len(slot)
            s, d = (_requalify(a.copy(), names) for a in call.expressions[:2])
            idx = call.expressions[2].copy() if len(call.expressions) == 3 else exp.Literal.string("")
            aggs += [exp.alias_(exp.func("list", s), f"{_PREFIX}s{k}"),
                     exp.alias_(exp.func("list", d), f"{_PREFIX}d{k}")]
            outs.append(exp.alias_(exp.func("unnest", exp.func(
                "reaches_list", exp.column(f"{_PREFIX}s{k}"), exp.column(f"{_PREFIX}d{k}"), idx)),
                f"{_PREFIX}r{k}"))
            slot[key] = f"{_PREFIX}r{k}"
        call.replace(exp.column(slot[key], table=alias))
    inner = exp.select(*aggs).from_(inner_src)
    outer = exp.select(*outs).from_(inner.subquery())
    src.replace(outer.subquery(alias))
    _exclude_slots(select, list(slot.values()))


def _requalify(node, names: set[str]):
    """Point the source's qualified column references at the inner alias."""
    for col in node.find_all(exp.Column):
        if col.table and col.table.lower() in names:
            col.set("table", exp.to_identifier(_PREFIX + "t"))
    return node


def _exclude_slots(select: exp.Select, slots: list[str]) -> None:
    """``SELECT *`` must not show the answer columns the rewrite added."""
    for star in select.expressions:
        target = star.this if isinstance(star, exp.Column) and isinstance(star.this, exp.Star) else star
        if isinstance(target, exp.Star):
            have = list(target.args.get("except_") or target.args.get("except") or [])
            key = "except_" if "except_" in exp.Star.arg_types else "except"
            target.set(key, have + [exp.column(s) for s in slots])


def rewrite(query: str, columns_of=None) -> str:
    """The query with each SELECT's ``reaches(...)`` calls that read its single source moved to
    the whole-column path (``reaches_list`` over list-aggregated columns); other SELECTs are left
    as they are. ``columns_of(source)`` may return the lower-cased column names of a FROM source,
    so that unqualified names that are not the source's (outer references) keep the scalar path.
    """
    try:
        statements = sqlglot.parse(query, dialect=DIALECT)
    except (ParseError, TokenError) as exc:
        raise GrailError(f"grail_duckdb.sql: cannot parse the query: {exc}") from None
    if len(statements) != 1 or statements[0] is None:
        raise GrailError("grail_duckdb.sql: pass exactly one statement")
    tree = statements[0]
    selects = list(tree.find_all(exp.Select))
    for select in reversed(selects):  # innermost first: outer ones see rewritten sources
        _rewrite_select(select, columns_of)
    return tree.sql(DIALECT)


def columns_via(con):
    """A ``columns_of`` that asks DuckDB for a source's column names (no rows are read)."""
    def columns_of(src) -> set[str] | None:
        src.set("alias", None)
        try:
            desc = con.execute(f"SELECT * FROM {src.sql(DIALECT)} LIMIT 0").description
        except Exception:
            return None
        return {d[0].lower() for d in desc}
    return columns_of
