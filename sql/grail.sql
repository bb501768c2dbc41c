-- The SQL surface of grail_duckdb, created by grail_duckdb.install(con) on each connection.
--
-- The macros are TEMP (they live in the connection's temp schema, so nothing is written into a
-- database file). The Python functions they call are written __grail_py_<name> here; install
-- registers them on each connection under names of its own (__grail_<token>_<name>) and
-- replaces the prefix, so that closing one connection never leaves another calling a function
-- whose Python side is gone. DuckDB has no ANY parameter type, so the macros pick the integer
-- or the VARCHAR implementation from typeof(): typeof is a constant of the argument's type, so
-- the CASE is folded away when the statement is planned.

-- 'int', 'str', 'null' or 'other' for a DuckDB type name (the result of typeof).
CREATE OR REPLACE TEMP MACRO __grail_kind(t) AS
    CASE WHEN t = 'VARCHAR' THEN 'str'
         WHEN t IN ('TINYINT', 'SMALLINT', 'INTEGER', 'BIGINT',
                    'UTINYINT', 'USMALLINT', 'UINTEGER', 'UBIGINT') THEN 'int'
         WHEN t = '"NULL"' THEN 'null'
         ELSE 'other' END;

-- The same for a list type ('BIGINT[]' -> 'int'); a NULL list: 'null'; the empty list
-- literal []: 'empty' (it takes the other list's kind, and answers [] against any index).
CREATE OR REPLACE TEMP MACRO __grail_list_kind(t) AS
    CASE WHEN t = '"NULL"' THEN 'null'
         WHEN t = '"NULL"[]' THEN 'empty'
         WHEN suffix(t, '[]') THEN __grail_kind(t[1:-3])
         ELSE 'other' END;

CREATE OR REPLACE TEMP MACRO __grail_list_pair(ka, kb) AS
    CASE WHEN ka = kb THEN (CASE WHEN ka = 'empty' THEN 'int' ELSE ka END)
         WHEN ka IN ('null', 'empty') THEN (CASE WHEN kb = 'empty' THEN 'int' ELSE kb END)
         WHEN kb IN ('null', 'empty') THEN (CASE WHEN ka = 'empty' THEN 'int' ELSE ka END)
         ELSE 'bad' END;

-- The key kind shared by the types of a (src, dst) pair: a NULL literal takes the other's kind,
-- two different kinds give 'bad'.
CREATE OR REPLACE TEMP MACRO __grail_pair(ka, kb) AS
    CASE WHEN ka = kb THEN ka
         WHEN ka = 'null' THEN kb
         WHEN kb = 'null' THEN ka
         ELSE 'bad' END;

CREATE OR REPLACE TEMP MACRO __grail_pair_kind(ta, tb) AS
    __grail_pair(__grail_kind(ta), __grail_kind(tb));

-- Keys of a type no index has: an error that names the types. For reaches() it is raised by a
-- Python function of the keys (DuckDB treats error() as volatile, which window clauses refuse);
-- for constant keys it is raised when the statement is planned.
CREATE OR REPLACE TEMP MACRO __grail_key_error(a, b) AS
    __grail_py_key_error(typeof(a) || ' and ' || typeof(b), CAST(a AS VARCHAR) || CAST(b AS VARCHAR));

CREATE OR REPLACE TEMP MACRO __grail_type_error(ta, tb) AS
    error('KeyTypeError: vertex keys must be both integers or both VARCHAR, got ' || ta || ' and '
          || tb || '; cast them to the key type of the edge table, e.g. CAST(x AS BIGINT)');

-- reaches(src, dst [, index_name]): is there a directed path src -> dst?
-- NULL -> NULL, x reaches x, a key that is no vertex reaches nothing. Without index_name (or
-- with '') the only index of the database answers; the two-argument form calls a two-argument
-- function, so DuckDB converts no per-row name column for each chunk.
CREATE OR REPLACE TEMP MACRO reaches(a, b) AS
    CASE __grail_pair_kind(typeof(a), typeof(b))
        WHEN 'str' THEN __grail_py_reaches_str_only(CAST(a AS VARCHAR), CAST(b AS VARCHAR))
        WHEN 'int' THEN __grail_py_reaches_int_only(CAST(a AS BIGINT), CAST(b AS BIGINT))
        WHEN 'null' THEN CAST(NULL AS BOOLEAN)
        ELSE __grail_key_error(a, b) END,
    (a, b, index_name) AS
    CASE __grail_pair_kind(typeof(a), typeof(b))
        WHEN 'str' THEN __grail_py_reaches_str(CAST(a AS VARCHAR), CAST(b AS VARCHAR),
                                               CAST(index_name AS VARCHAR))
        WHEN 'int' THEN __grail_py_reaches_int(CAST(a AS BIGINT), CAST(b AS BIGINT),
                                               CAST(index_name AS VARCHAR))
        WHEN 'null' THEN CAST(NULL AS BOOLEAN)
        ELSE __grail_key_error(a, b) END;

-- The list form: two lists of keys in, one list of answers out, one engine call per chunk of
-- rows (a NULL list on either side gives NULL).
CREATE OR REPLACE TEMP MACRO reaches_list(a, b, index_name := '') AS
    CASE __grail_list_pair(__grail_list_kind(typeof(a)), __grail_list_kind(typeof(b)))
        WHEN 'str' THEN __grail_py_reaches_list_str(CAST(a AS VARCHAR[]), CAST(b AS VARCHAR[]),
                                                    CAST(index_name AS VARCHAR))
        WHEN 'int' THEN __grail_py_reaches_list_int(CAST(a AS BIGINT[]), CAST(b AS BIGINT[]),
                                                    CAST(index_name AS VARCHAR))
        WHEN 'null' THEN CAST(NULL AS BOOLEAN[])
        ELSE __grail_type_error(typeof(a), typeof(b)) END;

-- reaches_pairs(table_name, src_column, dst_column [, index_name]): every row of a table or
-- view as (src, dst, reaches). The names are looked up as names (query_table,
-- struct_extract), never spliced into SQL text. On an installed connection a call with
-- literal names is answered whole-column (one engine call for the table).
CREATE OR REPLACE TEMP MACRO reaches_pairs(table_name, src_column, dst_column, index_name := '') AS TABLE
    SELECT p.src, p.dst, reaches(p.src, p.dst, index_name) AS reaches
    FROM (SELECT struct_extract(r, src_column) AS src, struct_extract(r, dst_column) AS dst
          FROM query_table(table_name) AS r) AS p;

-- One-to-all: the vertex ids a key reaches (forward) or that reach it, by one traversal;
-- [-1] for a key that is not a vertex (it reaches only itself), NULL for NULL.
CREATE OR REPLACE TEMP MACRO __grail_reach_ids(x, index_name, forward) AS
    CASE __grail_kind(typeof(x))
        WHEN 'str' THEN __grail_py_reach_ids_str(CAST(x AS VARCHAR), CAST(index_name AS VARCHAR), forward)
        WHEN 'int' THEN __grail_py_reach_ids_int(CAST(x AS BIGINT), CAST(index_name AS VARCHAR), forward)
        WHEN 'null' THEN CAST(NULL AS INTEGER[])
        ELSE __grail_type_error(typeof(x), typeof(x)) END;

CREATE OR REPLACE TEMP MACRO __grail_reach_count(x, index_name, forward) AS
    CASE __grail_kind(typeof(x))
        WHEN 'str' THEN __grail_py_reach_count_str(CAST(x AS VARCHAR), CAST(index_name AS VARCHAR), forward)
        WHEN 'int' THEN __grail_py_reach_count_int(CAST(x AS BIGINT), CAST(index_name AS VARCHAR), forward)
        WHEN 'null' THEN CAST(NULL AS BIGINT)
        ELSE __grail_type_error(typeof(x), typeof(x)) END;

-- descendants(x [, index_name]): the keys x reaches, x itself included (reaches(x, x) is true);
-- ancestors(x [, index_name]): the keys that reach x, x included. A key that is not a vertex
-- gives itself only, NULL gives no rows. One column, key; no particular order.
CREATE OR REPLACE TEMP MACRO descendants(x, index_name := '') AS TABLE
    WITH r AS MATERIALIZED (SELECT __grail_reach_ids(x, index_name, true) AS ids)
    SELECT k.key FROM query_table(__grail_py_keys_source(CAST(index_name AS VARCHAR))) AS k
    WHERE k.id IN (SELECT unnest(ids) FROM r)
    UNION ALL SELECT x FROM r WHERE ids = [-1];

CREATE OR REPLACE TEMP MACRO ancestors(x, index_name := '') AS TABLE
    WITH r AS MATERIALIZED (SELECT __grail_reach_ids(x, index_name, false) AS ids)
    SELECT k.key FROM query_table(__grail_py_keys_source(CAST(index_name AS VARCHAR))) AS k
    WHERE k.id IN (SELECT unnest(ids) FROM r)
    UNION ALL SELECT x FROM r WHERE ids = [-1];

-- The counting forms: how many rows descendants(x) / ancestors(x) would return (NULL for NULL).
CREATE OR REPLACE TEMP MACRO descendants_count(x, index_name := '') AS
    __grail_reach_count(x, index_name, true);

CREATE OR REPLACE TEMP MACRO ancestors_count(x, index_name := '') AS
    __grail_reach_count(x, index_name, false);

-- grail_index(table [, src, dst, labels, name, path, rebuild, auto_rebuild]): build the index
-- of an edge table (or load the persisted one while it is fresh) and return a one-row summary.
-- As a scalar: SELECT grail_index('cites'); as a table: SELECT * FROM grail_index('cites').
-- auto_rebuild NULL keeps the index's own setting (recorded with its file; false when new).
CREATE OR REPLACE TEMP MACRO grail_index(table_name, src := 'src', dst := 'dst', labels := NULL,
                                         name := '', path := '', rebuild := false,
                                         auto_rebuild := NULL) AS
    __grail_py_index(table_name, src, dst, labels, name, path, rebuild, auto_rebuild);

CREATE OR REPLACE TEMP MACRO grail_index(table_name, src := 'src', dst := 'dst', labels := NULL,
                                         name := '', path := '', rebuild := false,
                                         auto_rebuild := NULL) AS TABLE
    WITH built AS MATERIALIZED (
        SELECT __grail_py_index(table_name, src, dst, labels, name, path, rebuild,
                                auto_rebuild) AS s)
    SELECT unnest(s) FROM built;  -- materialized: the build runs once, not once per field

-- grail_indexes(): the indices this database knows in this process, one row each.
CREATE OR REPLACE TEMP MACRO grail_indexes() AS TABLE
    WITH listed AS MATERIALIZED (SELECT __grail_py_indexes() AS l)
    SELECT unnest(l, max_depth := 2) FROM listed;
