"""Which path a statement takes, and running its whole-column form.

For a statement on an installed connection that names ``reaches`` (or ``descendants`` /
``ancestors``), :func:`route` hands :mod:`.hooks` a :class:`Route`; its ``run`` plans the
statement (:mod:`.rewrite`, cached per statement text) and, when the plan rewrites anything:

1. checks every index the statement uses for freshness (:meth:`.Registry.fresh`);
2. one-to-all sites: evaluates the constant key, takes its set (one traversal, cached per
   index) and registers it as an Arrow source for a semi-join;
3. whole-column scopes, innermost first: fetches the source's rows as Arrow (the columns the
   statement uses and the call arguments), answers each distinct call in one engine call and
   registers the copy with the answers;
4. binds and runs the rewritten statement, keeping the registered sources alive as long as its
   result (``execute``) or relation (``sql``) can be read.

Anything it cannot do exactly (a sub-statement that does not bind, keys of another type than
the index's, an unexpected shape) sends the statement back to DuckDB as written: the
per-chunk path, which gives the same rows. Binding is checked before anything runs, so a
fallback never leaves a user's transaction aborted.
"""
from __future__ import annotations

import contextlib
import weakref

import duckdb
import pyarrow as pa
import sqlglot
from sqlglot.tokens import TokenType

from ..engine import paths
from ..engine.ingest import key_kind
from ..engine.queries import QueryCancelled
from ..errors import EdgeInputError, GrailError, KeyTypeError
from . import connections, duckdb_api, exactness, hooks, rewrite, traversal
from .sqlerrors import as_sql_error, grail_error

__all__ = ["PLANS_PER_DATABASE", "Route", "explain", "per_chunk", "route"]

PLANS_PER_DATABASE = 256
_PER_CHUNK: "weakref.WeakSet" = weakref.WeakSet()


class _Fallback(Exception):
    """Run the statement as written (per-chunk path)."""


@contextlib.contextmanager
def per_chunk(con):
    """A context in which ``con`` runs every statement as written: DuckDB calls the index
    once per chunk of at most 2,048 rows (for comparison with the whole-column path, which
    gives the same rows).

    Parameters
    ----------
    con : duckdb.DuckDBPyConnection
        An installed connection.

    Examples
    --------
    >>> import duckdb, grail_duckdb as gd
    >>> con = gd.install(duckdb.connect())
    >>> _ = con.execute("CREATE TABLE e AS SELECT 1 AS src, 2 AS dst")
    >>> _ = con.execute("SELECT grail_index('e')").fetchall()
    >>> with gd.per_chunk(con):
    ...     con.execute("SELECT reaches(1, 2), reaches(2, 1)").fetchall()
    [(True, False)]
    >>> con.close()
    """
    _PER_CHUNK.add(con)
    try:
        yield con
    finally:
        _PER_CHUNK.discard(con)


class Route:
    """One statement on an installed connection (see the module's docstring).

    ``rewrite``: whether the statement may be rewritten; ``capture``: whether the hook must bind
    it first with DuckDB's capture of Python variables (always the first time; afterwards only
    when its plan reads Python variables, whose current objects must be looked up).
    """

    __slots__ = ("con", "method", "text", "params", "rewrite", "capture", "inst", "plan")

    def __init__(self, con, inst, method, text, params, plan):
        self.con, self.inst, self.method = con, inst, method
        self.text, self.params, self.plan = text, params, plan
        self.rewrite = text is not None and plan is not None and (plan is _UNKNOWN or plan.rewrites)
        self.capture = plan is _UNKNOWN or bool(plan and plan.variables)

    def run(self, captured):
        """The result of the rewritten statement, or ``hooks.PLAIN``."""
        reg = self.inst.registry
        handles = {name: h for name, h in captured}
        plan = self.plan
        if plan is _UNKNOWN or (plan is not None and set(plan.variables.values()) != set(handles)):
            plan = _new_plan(self.con, reg, self.text, self.params, handles)
        if (plan is None or not plan.rewrites
                or refusal(self.con, plan, self.text) is not None):
            return hooks.PLAIN
        hooks.clear_interrupt(self.con)
        self.con.abort()  # as DuckDB's execute does: a new statement ends an unread result
        try:
            return _execute_plan(self, reg, plan, self.params, handles)
        except _Fallback:
            return hooks.PLAIN
        except GrailError as exc:
            raise as_sql_error(exc) from None
        except duckdb.Error as exc:
            if grail_error(exc) is None:
                raise
            raise grail_error(exc) from None  # no local holds it: its frames go with it


_UNKNOWN = object()  # no plan yet


def route(con, method, query, params):
    """A :class:`Route` for a statement on an installed connection (or on a cursor of one,
    which is installed on its first statement that uses the plugin), else None. Relations
    (``sql``) are never rewritten: DuckDB evaluates them when they are fetched."""
    inst = connections.installation(con)
    mentions = isinstance(query, str) and rewrite.MENTION.search(query) is not None
    if inst is None:
        if not mentions or not hooks.in_family(con):
            return None
        inst = connections.install_on(con)
    if (not mentions or con in _PER_CHUNK or method != "execute"
            or not exactness.parsable(query)):
        return Route(con, inst, method, None, None, None)
    text, values = rewrite.normalise(query, params)
    plan = None if text is None else inst.registry.plans.get(_key(text, values), _UNKNOWN)
    return Route(con, inst, method, text, values, plan)


def refusal(con, plan, text) -> str | None:
    """Why a planned statement must run as written on ``con`` now (see :mod:`.exactness`),
    or None. What it calls is looked up again after each write to the database (a view or
    macro it names may have changed)."""
    if plan.why:
        return plan.why
    version = duckdb_api.catalog_version(con)
    if plan.checked != version:
        plan.volatile = exactness.volatile_calls(con, text, hooks.original("execute"))
        plan.checked = version
    if plan.volatile:
        return "it calls " + ", ".join(plan.volatile)
    return None


def _key(text, params):
    return (text, isinstance(params, dict) and tuple(sorted(params)))


def _new_plan(con, reg, text, params, handles):
    variables = {name: f'"{h.name}"' for name, h in handles.items()}
    plan = rewrite.plan_for(text, lambda sql: _columns(con, sql, params), variables)
    plans = reg.plans
    plans[_key(text, params)] = plan
    while len(plans) > PLANS_PER_DATABASE:
        plans.popitem(last=False)
    return plan


def _columns(con, sql: str, params) -> list | None:
    """The column names ``sql`` returns, or None when it does not bind (nothing runs)."""
    try:
        return duckdb_api.bind(con, sql, values=_subset(params, rewrite_params(sql))).names
    except Exception:
        return None


def rewrite_params(sql: str) -> set:
    """The parameter names a SQL text uses (``$name``, ``$1``)."""
    import sqlglot
    from sqlglot import exp

    try:
        tree = sqlglot.parse_one(sql, dialect=rewrite.DIALECT)
    except Exception:
        return set()
    return {p.name for p in tree.find_all(exp.Placeholder, exp.Parameter) if p.name}


def _subset(params, used: set):
    if params is None or not used:
        return None
    return {k: params[k] for k in used if k in params}


def _execute_plan(route_, reg, plan, params, handles):
    con = route_.con
    keep: list = []
    subst = {m: f'"{handles[name].name}"' for m, name in plan.variables.items()}
    keep += [handles[name] for name in plan.variables.values()]
    version = reg.catalog_version()
    for site in plan.consts:
        subst[site.marker] = _const_sql(con, reg, site, params, version, keep)
    for scope in plan.scopes:
        subst[scope.marker] = _scope_copy(route_, reg, scope, params, subst, version, keep)
    final = _substitute(plan.main_sql, subst)
    used = _subset(params, _params_of(final))
    if _bind_ok(con, final, used) is False:
        raise _Fallback
    out = hooks.original("execute")(con, final, used)
    hooks.keep(con, keep)
    return out


def _params_of(sql: str) -> set:
    """The parameter names in a SQL text (tokens, so strings and comments do not count)."""
    if "$" not in sql:
        return set()
    tokens = sqlglot.Dialect.get_or_raise(rewrite.DIALECT).tokenize(sql)
    return {b.text for a, b in zip(tokens, tokens[1:]) if a.token_type == TokenType.PARAMETER}


def _bind_ok(con, sql, params) -> bool:
    try:
        duckdb_api.bind(con, sql, values=params)
        return True
    except Exception:
        return False


def _substitute(sql: str, subst: dict) -> str:
    for marker in sorted(subst, key=len, reverse=True):
        sql = sql.replace(marker, subst[marker])
    return sql


# --- one-to-all sites ---------------------------------------------------------------------------
def _const_sql(con, reg, site, params, version, keep) -> str:
    """The SQL that replaces a one-to-all site: a semi-join on the set of the constant key,
    or the site as written when the key does not fit the index (or is NULL)."""
    value = _const_value(con, site.const, params)
    kind = ("int" if isinstance(value, int) and not isinstance(value, bool)
            else "str" if isinstance(value, str) else None)
    if kind is None:
        return site.original
    entry = reg.fresh(reg.get(site.index), version)
    if entry.index.key_kind != kind or (kind == "int" and not -2**63 <= value < 2**63):
        return site.original
    if site.other is None:
        rec = traversal.hops_record(entry, value, site.forward)
        handle = _registered(con, rec, "plain", lambda: rec["table"])
        keep.append(handle)
        return f'(SELECT key, hops FROM "{handle.name}") AS {site.alias}'
    rec = traversal.record(entry, value, site.forward)
    if kind == "int":
        handle = _registered(con, rec, "plain", lambda: pa.table({"key": rec["keys"]}))
        # a key beyond BIGINT (a UBIGINT) is no vertex and not the constant: false
        test = (f'(CASE WHEN ({site.other}) IS NULL THEN NULL ELSE coalesce(TRY_CAST('
                f'{site.other} AS BIGINT) IN (SELECT key FROM "{handle.name}"), false) END)')
    else:
        handle = _registered(con, rec, "bytes", lambda: pa.table(
            {"key": rec["keys"].cast(pa.large_string()).cast(pa.large_binary())}))
        test = f'(encode(CAST({site.other} AS VARCHAR)) IN (SELECT key FROM "{handle.name}"))'
    keep.append(handle)
    c = site.const.sql(rewrite.DIALECT)
    return (f"(CASE __grail_pair_kind(typeof({site.other}), typeof({c})) WHEN '{kind}' THEN "
            f"{test} ELSE __grail_key_error({site.other}, {c}) END)")


def _registered(con, rec: dict, form: str, make):
    """The set of a record registered in DuckDB as an Arrow source (kept with the record)."""
    handle = rec.get(form)
    if handle is None:
        handle = rec[form] = duckdb_api.register_source(con, make())
    return handle


def _const_value(con, node, params):
    """The value of a constant key expression (literals and parameters without DuckDB)."""
    from sqlglot import exp

    if isinstance(node, exp.Literal):
        if node.is_string:
            return node.this
        try:
            return int(node.this)
        except ValueError:
            return None
    if isinstance(node, (exp.Placeholder, exp.Parameter)):
        if params is None or node.name not in params:
            raise _Fallback
        return params[node.name]
    sql = node.sql(rewrite.DIALECT)
    try:
        row = hooks.original("execute")(con, f"SELECT {sql}",
                                        _subset(params, rewrite_params(f"SELECT {sql}"))).fetchall()
    except duckdb.Error:
        raise _Fallback from None
    return row[0][0]


# --- whole-column scopes -------------------------------------------------------------------------
def _scope_copy(route_, reg, scope, params, subst, version, keep) -> str:
    """Fetch a scope's source, answer its calls, register the copy; returns its quoted name."""
    con = route_.con
    sql = _substitute(scope.fetch_sql, subst)
    used = _subset(params, scope.params)
    if not _bind_ok(con, sql, used):
        raise _Fallback
    table = hooks.original("sql")(con, sql, params=used).to_arrow_table()
    answer_names = {f"__grail_{s}{n}" for n, _, _ in scope.calls for s in "abk"}
    if scope.keep[:1] == ["*"]:
        kept = [c for c in table.column_names if c not in answer_names]
    else:
        kept = list(scope.keep)
    cols = {c: table.column(c) for c in kept}
    for n, index_name, fn in scope.calls:
        entry = reg.fresh(reg.get(index_name), version)
        k = table.column(f"__grail_k{n}") if fn == "reaches_within" else None
        cols[f"__grail_r{n}"] = _answers(entry, table.column(f"__grail_a{n}"),
                                         table.column(f"__grail_b{n}"), con, fn, k)
    handle = duckdb_api.register_source(
        con, pa.table(cols) if cols else pa.table({"__grail_none": []}))
    keep.append(handle)
    return f'"{handle.name}"'


def _answers(entry, a: pa.ChunkedArray, b: pa.ChunkedArray, con, fn: str = "reaches", k=None):
    """One engine call of ``fn`` (``reaches``, ``hops``, ``reaches_path``, ``reaches_within``
    with its bounds ``k``) for a whole column; types the macro would refuse (or keys of another
    kind than the index's) send the statement back to the per-chunk path, which reports
    exactly what DuckDB reports. ``con.interrupt()`` stops the call (the engine's cancel hook:
    DuckDB's own interrupt waits for a running Python call)."""
    kinds = {_kind(a.type), _kind(b.type)} - {"null"}
    if len(kinds) > 1 or not kinds <= {"int", "str"}:
        raise _Fallback
    if k is not None and not (pa.types.is_integer(k.type) or pa.types.is_null(k.type)):
        raise _Fallback
    if len(a) == 0 and fn == "reaches":
        return pa.array([], pa.bool_())
    if kinds and kinds != {entry.index.key_kind}:
        raise _Fallback
    cancel = lambda: hooks.interrupted(con)  # noqa: E731
    idx = entry.index
    try:
        if fn == "hops":
            return idx.hops(a, b, cancel)
        if fn == "reaches_path":  # keys of the arguments' type, as the macro's cast_to_type
            typ = b.type if pa.types.is_null(a.type) else a.type
            out = idx.path(a, b, cancel)
            return out if pa.types.is_null(typ) else out.cast(pa.list_(typ))
        if fn == "reaches_within":
            return paths.reaches_within(idx, a, b, k, cancel)
        few = traversal.few_keys_answers(entry, a, b)
        if few is not None:
            return few
        return idx.reaches_with_stats(a, b, cancel=cancel)[0]
    except (KeyTypeError, EdgeInputError):
        raise _Fallback from None
    except QueryCancelled:
        raise duckdb.InterruptException("INTERRUPT Error: Interrupted!") from None


def _kind(typ) -> str:
    if pa.types.is_null(typ):
        return "null"
    try:
        return key_kind(typ)
    except EdgeInputError:
        return "other"


def explain(con, query: str, params=None) -> str:
    """Which path a statement's calls of the plugin take on ``con``, as text (it runs nothing).

    Parameters
    ----------
    con : duckdb.DuckDBPyConnection
    query : str
    params : dict or sequence, optional

    Returns
    -------
    str
        ``per-chunk: ...`` with the reason, or the statement as it will run (``=> ...``; calls
        still in it run per chunk) and what each marker ``@n`` becomes (a one-to-all set, or
        a source's copy with whole-column answers). Print it.

    Examples
    --------
    >>> import duckdb, grail_duckdb as gd
    >>> con = gd.install(duckdb.connect())
    >>> gd.explain(con, "CREATE VIEW v AS SELECT reaches(1, 2)").startswith("per-chunk")
    True
    >>> con.close()
    """
    inst = connections.install_on(con)
    if not exactness.parsable(query):
        return "per-chunk (not a query): " + query.strip()
    text, values = rewrite.normalise(query, params)
    if text is None:
        return "per-chunk: the parameters do not fit the statement"
    plan = inst.registry.plans.get(_key(text, values)) or _new_plan(con, inst.registry, text,
                                                                     values, {})
    if plan is None:
        return "per-chunk: not one statement that sqlglot parses"
    why = refusal(con, plan, text) if plan.rewrites or plan.why else None
    if why is not None:
        return f"per-chunk ({why}): " + query.strip()
    if not plan.rewrites:
        return "per-chunk: " + query.strip()
    return rewrite.describe(plan)
