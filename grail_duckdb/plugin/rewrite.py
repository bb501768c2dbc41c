"""Which ``reaches`` calls of a statement can be answered with whole columns, and the
statement rewritten for it (a :class:`Plan` of SQL templates; :mod:`.statements` runs it).

Three kinds of site, found with sqlglot:

* **one-to-all calls** ``reaches(e, c)`` / ``reaches(c, e)`` with ``c`` a constant (literal,
  parameter, cast of one), anywhere in any statement: replaced by a membership test of ``e`` in
  the set of keys that reach ``c`` (or that ``c`` reaches), computed by one traversal and read
  by DuckDB as a semi-join; NULL on either side stays NULL.
* **one-to-all tables** ``descendants(c)`` / ``ancestors(c)`` in FROM: replaced by that set.
* **whole-column scopes**: the ``reaches`` calls (and ``hops``, ``reaches_path``,
  ``reaches_within``: :data:`WHOLE_COLUMN`) of one SELECT whose arguments read only one of
  its FROM sources (a table, view, file, Arrow object or subquery, not null-extended by an
  outer join): the source's rows are fetched once (the columns the statement uses, and the
  arguments), every distinct call is answered in one engine call, and the statement reads that
  copy with the answers as extra columns instead of the source. The copy holds the source's
  rows in the order a scan returns them, so the rows (and their order, where the statement
  fixes one) are those of the per-chunk path.

Everything else keeps the per-chunk path: calls that read two sources, correlated references,
calls whose arguments hold aggregates or subqueries, and every statement :mod:`.exactness`
keeps as written (DDL, UPDATE and DELETE, grouping sets; at run time: writes, volatile
functions). Parameters are renamed to ``$1, $2, ...`` (positional ``?``) before
parsing, so every statement derived from the original binds the same values.

>>> p = plan_for("SELECT a FROM pairs WHERE reaches(a, b)", lambda sql: ["a", "b"], {})
>>> print(p.main_sql.replace(p.scopes[0].marker, "COPY"))
SELECT a FROM COPY AS pairs WHERE pairs.__grail_r0
>>> print(p.scopes[0].fetch_sql)
SELECT "a", (a) AS __grail_a0, (b) AS __grail_b0 FROM pairs
"""
from __future__ import annotations

import re
import uuid
from dataclasses import dataclass, field

import sqlglot
from sqlglot import exp
from sqlglot.errors import ParseError, TokenError
from sqlglot.tokens import TokenType

from . import exactness, names
from .names import DIALECT

__all__ = ["MENTION", "ConstSite", "Plan", "ScopeSite", "describe", "normalise", "plan_for"]

#: a statement that may use the plugin's functions (a cheap test before any parsing)
MENTION = re.compile(r"(?i)\b(?:reaches|descendants|ancestors|hops|grail_reach_counts)\w*\s*\(")
_ONE_TO_ALL = {"descendants": True, "ancestors": False}
#: the functions a whole-column scope answers: name -> its arguments before the index name
#: (the two keys, and reaches_within's k)
WHOLE_COLUMN = {"reaches": 2, "hops": 2, "reaches_path": 2, "reaches_within": 3}
_CONSTANT = (exp.Literal, exp.Placeholder, exp.Parameter, exp.Cast, exp.TryCast, exp.Neg,
             exp.Paren, exp.Null)


@dataclass
class ConstSite:
    """A one-to-all call or table: ``marker`` in the templates becomes a membership test (or
    the set itself), or the original SQL when the constant does not fit the index."""

    marker: str
    const: exp.Expr  # the constant key expression
    forward: bool  # True: the set of keys c reaches (descendants of c)
    index: str
    original: str  # the call or table as written
    other: str | None = None  # the other argument (calls); None for tables
    alias: str = ""  # tables: the alias to give the set


@dataclass
class ScopeSite:
    """One source of one SELECT whose ``reaches`` calls are answered with whole columns."""

    marker: str  # becomes the registered copy's name
    fetch_sql: str  # source rows: kept columns, then (__grail_a<n>, __grail_b<n>[, __grail_k<n>])
    keep: list  # source columns the copy keeps (['*'] = all fetched source columns)
    calls: list  # (n, index name, function): answer column __grail_r<n>
    params: set = field(default_factory=set)


@dataclass
class Plan:
    """A statement's templates: markers to replace, then ``main_sql`` runs."""

    main_sql: str
    params: set
    consts: list = field(default_factory=list)
    scopes: list = field(default_factory=list)  # innermost first
    variables: dict = field(default_factory=dict)  # marker -> Python variable name
    why: str = ""  # why the statement runs as written (:func:`.exactness.static_refusal`)
    checked: object = None  # the catalog version at the last check of what it calls
    volatile: list = field(default_factory=list)  # the volatile functions it calls, then

    @property
    def rewrites(self) -> bool:
        return bool(self.consts or self.scopes) and not self.why


def describe(plan: Plan) -> str:
    """The plan as text: the rewritten statement, then what each marker becomes (markers
    shown as ``@1, @2, ...``); ``reaches`` calls left in the text run per chunk.

    >>> print(describe(plan_for("SELECT count(*) FROM t WHERE reaches(x, 7)", None, {})))
    => SELECT COUNT(*) FROM t WHERE @1
    @1 <= x IN ancestors(7)
    """
    order = {}
    for m in re.findall(r"__grail_m[0-9a-f]+_\d+", plan.main_sql + "".join(
            s.fetch_sql for s in plan.scopes)):
        order.setdefault(m, f"@{len(order) + 1}")

    def show(text: str) -> str:
        return re.sub(r"__grail_m[0-9a-f]+_\d+", lambda mo: order.get(mo.group(0), "@?"), text)

    lines = [f"=> {show(plan.main_sql)}"]
    for site in plan.consts:
        fn = "descendants" if site.forward else "ancestors"
        args = site.const.sql(DIALECT) + (f", {names.sql_string(site.index)}" if site.index else "")
        what = f"{fn}({args})" if site.other is None else f"{site.other} IN {fn}({args})"
        lines.append(f"{show(site.marker)} <= {what}")
    for scope in plan.scopes:
        lines.append(f"{show(scope.marker)} <= {show(scope.fetch_sql)}")
    return "\n".join(lines)


def normalise(query: str, params):
    """``(text, dict or None)``: positional ``?`` renamed ``$1, $2, ...`` in text order and the
    parameters as a dict, so sub-statements can bind any subset; None when the statement and
    the parameters do not fit together (DuckDB then reports it)."""
    tokens = sqlglot.Dialect.get_or_raise(DIALECT).tokenize(query)
    spots = [t for t in tokens if t.text.startswith("?")  # '?::INT' is one token, QDCOLON
             and t.token_type in (TokenType.PLACEHOLDER, TokenType.QDCOLON)]
    if isinstance(params, dict):
        return (None, None) if spots else (query, dict(params))
    if params is None:
        return (None, None) if spots else (query, None)
    values = list(params)
    text = query
    for i, tok in reversed(list(enumerate(spots))):
        text = text[:tok.start] + f"${i + 1}" + text[tok.start + 1:]
    return text, {str(i + 1): v for i, v in enumerate(values)}


def plan_for(text: str, columns_of, variables: dict) -> Plan | None:
    """The plan of one statement; None when it cannot be parsed as one statement.

    ``columns_of(sql)`` returns the column names of ``SELECT * FROM <source>`` (None when that
    does not bind); ``variables`` maps Python variable names DuckDB captured for the statement
    to the SQL that reads them now (a registered source)."""
    try:
        statements = sqlglot.parse(text, dialect=DIALECT)
    except (ParseError, TokenError):
        return None
    if len(statements) != 1 or statements[0] is None:
        return None
    tree = statements[0]
    why = exactness.static_refusal(tree)
    if why:
        return Plan("", set(), why=why)
    return _Planner(tree, columns_of, variables).run()


class _Planner:
    def __init__(self, tree, columns_of, variables):
        self.tree = tree
        self.columns_of = columns_of or (lambda sql: None)
        self.token = uuid.uuid4().hex[:10]
        self.count = 0
        self.plan = Plan("", set())
        self.reverts: dict[str, str] = {}  # marker -> SQL that binds at plan time
        self.variables = variables

    def marker(self) -> str:
        self.count += 1
        return f"__grail_m{self.token}_{self.count}"

    def run(self) -> Plan:
        self._mark_variables()
        self._expand_reaches_pairs()
        self._one_to_all_tables()
        self._one_to_all_calls()
        scopes = [s for s in (self._scope(sel) for sel in reversed(list(self.tree.find_all(exp.Select))))
                  if s is not None]
        n = 0
        for select, groups in scopes:
            for source, calls, keep in groups:
                self._rewrite_scope(select, source, calls, keep, n)
                n += len(calls)
        self.plan.main_sql = self.tree.sql(DIALECT)
        self.plan.params = _params_in(self.tree) | {p for c in self.plan.consts
                                                     for p in _params_in(c.const)}
        return self.plan

    # --- preparation ----------------------------------------------------------------------
    def _mark_variables(self) -> None:
        """Tables that are Python variables (captured by DuckDB) become markers."""
        for table in list(self.tree.find_all(exp.Table)):
            if (isinstance(table.this, exp.Identifier) and not table.args.get("db")
                    and table.name in self.variables):
                m = self.marker()
                self.plan.variables[m] = table.name
                self.reverts[m] = self.variables[table.name]
                if not table.alias:
                    table.set("alias", exp.TableAlias(this=exp.to_identifier(table.name)))
                table.set("this", exp.to_identifier(m))

    def _expand_reaches_pairs(self) -> None:
        """``reaches_pairs('t', 'a', 'b' [, 'i'])`` with literal names -> the subquery
        ``SELECT a AS src, b AS dst, reaches(a, b, 'i') AS reaches FROM t``."""
        for table in list(self.tree.find_all(exp.Table)):
            fn = table.this
            if not (isinstance(fn, exp.Anonymous) and fn.name.lower() == "reaches_pairs"):
                continue
            args = fn.expressions
            if not 3 <= len(args) <= 4 or not all(_is_string(a) for a in args):
                continue
            try:
                qt = names.quote_table(args[0].name)
                qs, qd = names.quote_column(args[1].name), names.quote_column(args[2].name)
            except Exception:
                continue
            idx = f", {names.sql_string(args[3].name)}" if len(args) == 4 else ""
            sub = sqlglot.parse_one(f"(SELECT {qs} AS src, {qd} AS dst, reaches({qs}, {qd}{idx}) "
                                    f"AS reaches FROM {qt})", dialect=DIALECT)
            alias = table.args.get("alias") or exp.TableAlias(this=exp.to_identifier("reaches_pairs"))
            table.replace(exp.Subquery(this=sub.unnest(), alias=alias))

    def _one_to_all_tables(self) -> None:
        for table in list(self.tree.find_all(exp.Table)):
            fn = table.this
            if not isinstance(fn, exp.Anonymous) or fn.name.lower() not in _ONE_TO_ALL:
                continue
            args = fn.expressions
            if not 1 <= len(args) <= 2 or not _constant(args[0]):
                continue
            if len(args) == 2 and not _is_string(args[1]):
                continue
            m = self.marker()
            alias = table.args.get("alias") or exp.TableAlias(this=exp.to_identifier(fn.name.lower()))
            site = ConstSite(m, args[0].copy(), _ONE_TO_ALL[fn.name.lower()],
                             args[1].name if len(args) == 2 else "", table.sql(DIALECT),
                             alias=alias.sql(DIALECT))
            self.plan.consts.append(site)
            self.reverts[m] = site.original
            table.replace(exp.Table(this=exp.to_identifier(m)))

    def _one_to_all_calls(self) -> None:
        for call in list(self.tree.find_all(exp.Anonymous)):
            if not _is_reaches(call) or _inside_reaches(call):
                continue
            args = call.expressions
            if len(args) not in (2, 3) or (len(args) == 3 and not _is_string(args[2])):
                continue
            a, b = args[0], args[1]
            if _constant(a) == _constant(b) or any(_nested_reaches(x) for x in (a, b)):
                continue
            forward = _constant(a)
            const, other = (a, b) if forward else (b, a)
            m = self.marker()
            site = ConstSite(m, const.copy(), forward, args[2].name if len(args) == 3 else "",
                             call.sql(DIALECT), other=other.sql(DIALECT))
            self.plan.consts.append(site)
            self.reverts[m] = site.original
            call.replace(exp.column(m))

    # --- whole-column scopes ------------------------------------------------------------------
    def _scope(self, select: exp.Select):
        """``(select, [(source, calls, keep)])`` for the calls of ``select`` that read one
        source each, or None."""
        calls = [c for c in select.find_all(exp.Anonymous)
                 if _is_whole(c) and c.find_ancestor(exp.Select) is select
                 and not _inside_reaches(c) and _whole_column_args(c)]
        if not calls or not self._worth_it(select):
            return None
        sources = self._sources(select)
        if sources is None:
            return None
        by_source: dict[int, list] = {}
        for call in calls:
            src = self._source_of(call, sources)
            if src is not None:
                by_source.setdefault(src, []).append(call)
        groups = []
        for i, cs in by_source.items():
            node, alias, columns, preserved = sources[i]
            keep = self._kept_columns(select, node, alias, columns, cs)
            if preserved and keep is not None:
                groups.append((node, cs, keep))
        return (select, groups) if groups else None

    def _worth_it(self, select) -> bool:
        """Skip scopes DuckDB stops reading early (LIMIT without ORDER BY, EXISTS): whole
        columns would answer every row of the source for a few."""
        if select.args.get("limit") and not select.args.get("order"):
            return False
        if isinstance(self.tree, (exp.Update, exp.Delete)):
            return False  # DML on the source's own rows keeps the per-chunk path
        if isinstance(self.tree, exp.Insert) and isinstance(self.tree.this, (exp.Table, exp.Schema)):
            target = self.tree.this.this if isinstance(self.tree.this, exp.Schema) else self.tree.this
            if any(t.name.lower() == target.name.lower() for t in select.find_all(exp.Table)):
                return False
        return select.find_ancestor(exp.Exists) is None

    def _sources(self, select):
        """``[(node, alias, columns, preserved)]`` of the FROM and JOIN sources, or None when
        the SELECT has a kind of join this rewrite leaves alone."""
        frm = select.args.get("from_") or select.args.get("from")
        if frm is None or select.args.get("laterals"):
            return None
        nodes = [(frm.this, None)]
        for join in select.args.get("joins") or []:
            kind = (join.args.get("kind") or "").upper()
            if kind not in ("", "INNER", "CROSS", "OUTER") or join.args.get("method"):
                return None  # SEMI / ANTI / ASOF / POSITIONAL / NATURAL
            nodes.append((join.this, (join.args.get("side") or "").upper()))
        out = []
        for i, (node, side) in enumerate(nodes):
            if not isinstance(node, (exp.Table, exp.Subquery, exp.Values)) or isinstance(
                    node, exp.Lateral) or (isinstance(node, exp.Table) and node.args.get("joins")):
                return None
            later = [s for _, s in nodes[i + 1:]]
            preserved = side not in ("LEFT", "FULL") and not any(s in ("RIGHT", "FULL") for s in later)
            columns = self.columns_of(self._fetch_from(select, node, "*", pristine=True))
            out.append((node, _alias_of(node), columns, preserved))
        return out

    def _source_of(self, call, sources) -> int | None:
        """The one source all column references of the call's arguments belong to."""
        found = set()
        for col in (c for a in call.expressions[:_arity(call)] for c in a.find_all(exp.Column)):
            if col.args.get("db") or col.args.get("catalog"):
                return None
            if col.table:
                hits = [i for i, s in enumerate(sources) if s[1] and s[1].lower() == col.table.lower()]
            else:
                hits = [i for i, s in enumerate(sources)
                        if s[2] is not None and col.name.lower() in {c.lower() for c in s[2]}]
            if len(hits) != 1 or sources[hits[0]][2] is None:
                return None
            found.add(hits[0])
        return found.pop() if len(found) == 1 else None

    def _kept_columns(self, select, node, alias, columns, calls):
        """The source columns the statement reads outside the rewritten calls (['*'] for a
        star over the source), or None when the copy cannot stand in for the source."""
        if columns is None or len({c.lower() for c in columns}) != len(columns):
            return None
        if select.find(exp.Columns):
            return None  # COLUMNS(...) would also see the answer columns
        inside = {id(c) for call in calls for c in call.find_all(exp.Column)}
        used = {c.name.lower() for c in self.tree.find_all(exp.Column) if id(c) not in inside}
        if alias and alias.lower() in used and alias.lower() not in {c.lower() for c in columns}:
            return None  # the source used as a row value
        for proj in select.expressions:
            star = proj.this if isinstance(proj, exp.Column) and isinstance(proj.this, exp.Star) else proj
            if isinstance(star, exp.Star) and (not isinstance(proj, exp.Column) or not proj.table
                                               or (alias and proj.table.lower() == alias.lower())):
                return ["*"] + (["rowid"] if "rowid" in used else [])
        keep = [c for c in columns if c.lower() in used]
        if "rowid" in used and "rowid" not in {c.lower() for c in columns}:
            keep.append("rowid")
        return keep

    def _rewrite_scope(self, select, source, calls, keep, first: int) -> None:
        alias = _alias_of(source)
        m = self.marker()
        cols = ["*"] if keep[:1] == ["*"] else [names.quote_identifier(c) for c in keep]
        if keep[:1] == ["*"]:
            cols += [names.quote_identifier(c) for c in keep[1:]]
        items, slots, key_of = [], [], {}
        for call in calls:
            key = call.sql(DIALECT)
            if key not in key_of:
                n = first + len(key_of)
                key_of[key] = n
                arity = _arity(call)
                args = [x.sql(DIALECT) for x in call.expressions[:arity]]
                items += [f"({x}) AS __grail_{c}{n}" for x, c in zip(args, "abk")]
                idx = call.expressions[arity].name if len(call.expressions) > arity else ""
                slots.append((n, idx, call.name.lower()))
        fetch = self._fetch_from(select, source, ", ".join(cols + items))
        site = ScopeSite(m, fetch, keep, slots, _params_in(sqlglot.parse_one(fetch, dialect=DIALECT)))
        grouped = bool(select.args.get("group")) or any(
            isinstance(e, exp.AggFunc) for p in select.expressions for e in p.find_all(exp.AggFunc))
        for call in calls:
            ref = exp.column(f"__grail_r{key_of[call.sql(DIALECT)]}", table=alias)
            if grouped and _after_grouping(call, select):
                ref = exp.func("any_value", ref)  # one value per group: the group's keys decide it
            call.replace(ref)
        copy = exp.Table(this=exp.to_identifier(m))
        if alias:
            copy.set("alias", exp.TableAlias(this=exp.to_identifier(alias)))
        source.replace(copy)
        excluded = [exp.column(f"__grail_r{n}") for n, _, _ in slots]
        for proj in select.expressions:
            star = proj.this if isinstance(proj, exp.Column) and isinstance(proj.this, exp.Star) else proj
            if isinstance(star, exp.Star):
                key = "except_" if "except_" in exp.Star.arg_types else "except"
                star.set(key, list(star.args.get(key) or []) + [e.copy() for e in excluded])
        self.plan.scopes.append(site)

    def _fetch_from(self, select, source, columns_sql: str, pristine: bool = False) -> str:
        """``WITH <the CTEs the source needs> SELECT <columns_sql> FROM <source>``."""
        src_sql = source.sql(DIALECT)
        ctes, recursive = self._ctes_for(select, source)
        with_sql = ""
        if ctes:
            with_sql = ("WITH RECURSIVE " if recursive else "WITH ") + ", ".join(
                c.sql(DIALECT) for c in ctes) + " "
        sql = f"{with_sql}SELECT {columns_sql} FROM {src_sql}"
        if pristine:
            for m, original in self.reverts.items():
                sql = sql.replace(m, original)
        return sql

    def _ctes_for(self, select, source):
        """The CTEs visible at ``select`` that ``source`` reads (transitively), in order."""
        visible, recursive = [], False
        node = select
        while node is not None:
            with_ = node.args.get("with_") or node.args.get("with") if isinstance(node, exp.Expr) else None
            if isinstance(with_, exp.With):
                visible = list(with_.expressions) + visible
                recursive = recursive or bool(with_.args.get("recursive"))
            node = node.parent
        by_name = {c.alias_or_name.lower(): c for c in visible}
        needed, todo = set(), [source]
        while todo:
            for t in todo.pop().find_all(exp.Table):
                name = t.name.lower()
                if name in by_name and name not in needed and not t.args.get("db"):
                    needed.add(name)
                    todo.append(by_name[name].this)
        return [c for c in visible if c.alias_or_name.lower() in needed], recursive


def _after_grouping(call, select) -> bool:
    """Whether ``call`` is evaluated after GROUP BY (projection, HAVING, ORDER BY, QUALIFY) and
    outside any aggregate or window."""
    node = call
    while node.parent is not None and node.parent is not select:
        if isinstance(node.parent, (exp.AggFunc, exp.Filter, exp.Window)):
            return False
        node = node.parent
    return node.arg_key in ("expressions", "having", "order", "qualify")


def _is_reaches(node) -> bool:
    return isinstance(node, exp.Anonymous) and node.name.lower() == "reaches"


def _is_whole(node) -> bool:
    """A call of a function that whole-column scopes answer (:data:`WHOLE_COLUMN`)."""
    return isinstance(node, exp.Anonymous) and node.name.lower() in WHOLE_COLUMN


def _arity(call) -> int:
    """The arguments of a whole-column call before its optional index name."""
    return WHOLE_COLUMN[call.name.lower()]


def _is_string(node) -> bool:
    return isinstance(node, exp.Literal) and node.is_string


def _inside_reaches(node) -> bool:
    parent = node.parent
    while parent is not None:
        if _is_whole(parent):
            return True
        parent = parent.parent
    return False


def _nested_reaches(node) -> bool:
    return any(_is_whole(n) for n in node.find_all(exp.Anonymous))


def _constant(node) -> bool:
    """A literal, a parameter, or casts / signs / parentheses of those."""
    return all(isinstance(n, _CONSTANT + (exp.DataType, exp.Identifier, exp.Var, exp.DataTypeParam))
               for n in node.walk()) and not isinstance(node, exp.Null)


def _whole_column_args(call) -> bool:
    args, arity = call.expressions, _arity(call)
    if len(args) not in (arity, arity + 1) or (len(args) > arity and not _is_string(args[arity])):
        return False
    if not any(a.find(exp.Column) for a in args[:2]):
        return False
    bad = (exp.Subquery, exp.Select, exp.AggFunc, exp.Window, exp.Star, exp.Lambda)
    return not any(a.find(*bad) or _nested_reaches(a) for a in args[:arity])


def _alias_of(node) -> str | None:
    if node.alias:
        return node.alias
    if isinstance(node, exp.Table) and isinstance(node.this, exp.Identifier):
        return node.name
    return None


def _params_in(node) -> set:
    return {p.name for p in node.find_all(exp.Placeholder, exp.Parameter) if p.name}
