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

-- The same as __grail_pair(__grail_kind(ta), __grail_kind(tb)), read from a table of the 16
-- pairs: a macro is expanded where it is named, and __grail_pair names each kind four times
-- (each CASE of reaches() three): the lookup names each once, which DuckDB plans in less time.
CREATE OR REPLACE TEMP MACRO __grail_pair_kind(ta, tb) AS
    MAP {'str/str': 'str', 'str/int': 'bad', 'str/null': 'str', 'str/other': 'bad',
         'int/str': 'bad', 'int/int': 'int', 'int/null': 'int', 'int/other': 'bad',
         'null/str': 'str', 'null/int': 'int', 'null/null': 'null', 'null/other': 'other',
         'other/str': 'bad', 'other/int': 'bad', 'other/null': 'other', 'other/other': 'other'}
        [__grail_kind(ta) || '/' || __grail_kind(tb)];

-- Whether an integer key may lie above BIGINT's range (a UBIGINT): such a key is never a
-- vertex (the index's keys are 64-bit signed), so it reaches only itself.
CREATE OR REPLACE TEMP MACRO __grail_wide(ta, tb) AS ta = 'UBIGINT' OR tb = 'UBIGINT';

CREATE OR REPLACE TEMP MACRO __grail_outside(a, b) AS
    (a IS NOT NULL AND TRY_CAST(a AS BIGINT) IS NULL)
    OR (b IS NOT NULL AND TRY_CAST(b AS BIGINT) IS NULL);

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
        WHEN 'int' THEN
            CASE WHEN NOT __grail_wide(typeof(a), typeof(b))
                     THEN __grail_py_reaches_int_only(CAST(a AS BIGINT), CAST(b AS BIGINT))
                 WHEN __grail_outside(a, b) THEN a = b
                 ELSE __grail_py_reaches_int_only(TRY_CAST(a AS BIGINT), TRY_CAST(b AS BIGINT))
            END
        WHEN 'null' THEN CAST(NULL AS BOOLEAN)
        ELSE __grail_key_error(a, b) END,
    (a, b, index_name) AS
    CASE __grail_pair_kind(typeof(a), typeof(b))
        WHEN 'str' THEN __grail_py_reaches_str(CAST(a AS VARCHAR), CAST(b AS VARCHAR),
                                               CAST(index_name AS VARCHAR))
        WHEN 'int' THEN
            CASE WHEN NOT __grail_wide(typeof(a), typeof(b))
                     THEN __grail_py_reaches_int(CAST(a AS BIGINT), CAST(b AS BIGINT),
                                                 CAST(index_name AS VARCHAR))
                 WHEN __grail_outside(a, b) THEN a = b
                 ELSE __grail_py_reaches_int(TRY_CAST(a AS BIGINT), TRY_CAST(b AS BIGINT),
                                             CAST(index_name AS VARCHAR))
            END
        WHEN 'null' THEN CAST(NULL AS BOOLEAN)
        ELSE __grail_key_error(a, b) END;

-- The list form: two lists of keys in, one list of answers out, one engine call per chunk of
-- rows (a NULL list on either side gives NULL). A UBIGINT list goes to the engine as it is (a
-- key above BIGINT's range is never a vertex: it reaches only itself).
CREATE OR REPLACE TEMP MACRO reaches_list(a, b, index_name := '') AS
    CASE __grail_list_pair(__grail_list_kind(typeof(a)), __grail_list_kind(typeof(b)))
        WHEN 'str' THEN __grail_py_reaches_list_str(CAST(a AS VARCHAR[]), CAST(b AS VARCHAR[]),
                                                    CAST(index_name AS VARCHAR))
        WHEN 'int' THEN
            CASE WHEN typeof(a) = 'UBIGINT[]' AND typeof(b) = 'UBIGINT[]'
                     THEN __grail_py_reaches_list_uint_uint(CAST(a AS UBIGINT[]), CAST(b AS UBIGINT[]),
                                                            CAST(index_name AS VARCHAR))
                 WHEN typeof(a) = 'UBIGINT[]'
                     THEN __grail_py_reaches_list_uint_int(CAST(a AS UBIGINT[]), CAST(b AS BIGINT[]),
                                                           CAST(index_name AS VARCHAR))
                 WHEN typeof(b) = 'UBIGINT[]'
                     THEN __grail_py_reaches_list_int_uint(CAST(a AS BIGINT[]), CAST(b AS UBIGINT[]),
                                                           CAST(index_name AS VARCHAR))
                 ELSE __grail_py_reaches_list_int(CAST(a AS BIGINT[]), CAST(b AS BIGINT[]),
                                                  CAST(index_name AS VARCHAR))
            END
        WHEN 'null' THEN CAST(NULL AS BOOLEAN[])
        ELSE __grail_type_error(typeof(a), typeof(b)) END;

-- A column name as written in SQL ('"a b"', quotes doubled inside) as the name itself, as
-- query_table reads a quoted table name.
CREATE OR REPLACE TEMP MACRO __grail_unquoted(name) AS
    CASE WHEN length(name) >= 2 AND starts_with(name, '"') AND suffix(name, '"')
         THEN replace(name[2:-2], '""', '"') ELSE name END;

-- reaches_pairs(table_name, src_column, dst_column [, index_name]): every row of a table or
-- view as (src, dst, reaches). The names are looked up as names (query_table,
-- struct_extract), never spliced into SQL text. On an installed connection a call with
-- literal names is answered whole-column (one engine call for the table).
CREATE OR REPLACE TEMP MACRO reaches_pairs(table_name, src_column, dst_column, index_name := '') AS TABLE
    SELECT p.src, p.dst, reaches(p.src, p.dst, index_name) AS reaches
    FROM (SELECT struct_extract(r, __grail_unquoted(src_column)) AS src,
                 struct_extract(r, __grail_unquoted(dst_column)) AS dst
          FROM query_table(table_name) AS r) AS p;

-- One-to-all: the vertex ids a key reaches (forward) or that reach it, by one traversal;
-- [-1] for a key that is not a vertex (it reaches only itself), NULL for NULL.
-- The same with the hops of a shortest path from (or to) the key, within max_hops (NULL: any):
-- a list of (id, hops), [(-1, 0)] for a key that is not a vertex, [] for NULL or max_hops < 0
-- (ids, not keys: every branch of the CASE has the one type).
CREATE OR REPLACE TEMP MACRO __grail_reach_hops(x, index_name, forward, max_hops) AS
    CASE __grail_kind(typeof(x))
        WHEN 'str' THEN __grail_py_reach_hops_str(CAST(x AS VARCHAR), CAST(index_name AS VARCHAR),
                                                  forward, CAST(max_hops AS BIGINT))
        WHEN 'int' THEN
            CASE WHEN __grail_wide(typeof(x), typeof(x)) AND __grail_outside(x, x)
                     THEN CASE WHEN max_hops < 0 THEN CAST([] AS STRUCT(id INTEGER, hops INTEGER)[])
                               ELSE CAST([{'id': -1, 'hops': 0}] AS STRUCT(id INTEGER, hops INTEGER)[])
                          END
                 ELSE __grail_py_reach_hops_int(TRY_CAST(x AS BIGINT), CAST(index_name AS VARCHAR),
                                                forward, CAST(max_hops AS BIGINT))
            END
        WHEN 'null' THEN CAST([] AS STRUCT(id INTEGER, hops INTEGER)[])
        ELSE __grail_type_error(typeof(x), typeof(x)) END;

CREATE OR REPLACE TEMP MACRO __grail_reach_count(x, index_name, forward) AS
    CASE __grail_kind(typeof(x))
        WHEN 'str' THEN __grail_py_reach_count_str(CAST(x AS VARCHAR), CAST(index_name AS VARCHAR), forward)
        WHEN 'int' THEN
            CASE WHEN __grail_wide(typeof(x), typeof(x)) AND __grail_outside(x, x) THEN 1
                 ELSE __grail_py_reach_count_int(TRY_CAST(x AS BIGINT), CAST(index_name AS VARCHAR), forward)
            END
        WHEN 'null' THEN CAST(NULL AS BIGINT)
        ELSE __grail_type_error(typeof(x), typeof(x)) END;

-- descendants(x [, index_name, max_hops]): the keys x reaches within max_hops edges (NULL, the
-- default: any number), x itself included (reaches(x, x) is true), with hops, the edges of a
-- shortest path from x (0 for x); ancestors(x [, ...]): the keys that reach x, with the hops of
-- a shortest path to x. A key that is not a vertex gives itself only, NULL (or a negative
-- max_hops) gives no rows. Columns key, hops; no particular order.
CREATE OR REPLACE TEMP MACRO descendants(x, index_name := '', max_hops := NULL) AS TABLE
    WITH r AS MATERIALIZED (SELECT __grail_reach_hops(x, index_name, true, max_hops) AS l),
         h AS (SELECT unnest(l, recursive := true) FROM r)
    SELECT k.key, h.hops FROM query_table(__grail_py_keys_source(CAST(index_name AS VARCHAR))) AS k
    JOIN h ON k.id = h.id
    UNION ALL SELECT x, 0 FROM r WHERE len(l) = 1 AND l[1].id = -1;

CREATE OR REPLACE TEMP MACRO ancestors(x, index_name := '', max_hops := NULL) AS TABLE
    WITH r AS MATERIALIZED (SELECT __grail_reach_hops(x, index_name, false, max_hops) AS l),
         h AS (SELECT unnest(l, recursive := true) FROM r)
    SELECT k.key, h.hops FROM query_table(__grail_py_keys_source(CAST(index_name AS VARCHAR))) AS k
    JOIN h ON k.id = h.id
    UNION ALL SELECT x, 0 FROM r WHERE len(l) = 1 AND l[1].id = -1;

-- The counting forms: how many rows descendants(x) / ancestors(x) would return (NULL for NULL).
CREATE OR REPLACE TEMP MACRO descendants_count(x, index_name := '') AS
    __grail_reach_count(x, index_name, true);

CREATE OR REPLACE TEMP MACRO ancestors_count(x, index_name := '') AS
    __grail_reach_count(x, index_name, false);

-- The calling connection's session, for grail_index: the index reads its table through another
-- connection of the database, which resolves the table's name the way this one does with it
-- (its current database and schema, its search path; its TEMP objects it cannot read).
CREATE OR REPLACE TEMP MACRO __grail_session() AS
    {'database': current_database(), 'schema': current_schema(),
     'search_path': current_setting('search_path'),
     'temporary': (SELECT list(o.name) FROM (
                      SELECT t.table_name AS name FROM duckdb_tables() AS t WHERE t.temporary
                      UNION ALL
                      SELECT v.view_name FROM duckdb_views() AS v
                      WHERE v.temporary AND NOT v.internal) AS o)};

-- hops(src, dst [, index_name]): the edges of a shortest path src -> dst (hops inside a strongly
-- connected component count); NULL when there is none or a key is NULL, 0 for x -> x.
CREATE OR REPLACE TEMP MACRO hops(a, b) AS
    CASE __grail_pair_kind(typeof(a), typeof(b))
        WHEN 'str' THEN __grail_py_hops_str(CAST(a AS VARCHAR), CAST(b AS VARCHAR), '')
        WHEN 'int' THEN
            CASE WHEN __grail_wide(typeof(a), typeof(b)) AND __grail_outside(a, b)
                     THEN CAST(CASE WHEN a = b THEN 0 END AS INTEGER)
                 ELSE __grail_py_hops_int(TRY_CAST(a AS BIGINT), TRY_CAST(b AS BIGINT), '')
            END
        WHEN 'null' THEN CAST(NULL AS INTEGER)
        ELSE __grail_type_error(typeof(a), typeof(b)) END,
    (a, b, index_name) AS
    CASE __grail_pair_kind(typeof(a), typeof(b))
        WHEN 'str' THEN __grail_py_hops_str(CAST(a AS VARCHAR), CAST(b AS VARCHAR),
                                            CAST(index_name AS VARCHAR))
        WHEN 'int' THEN
            CASE WHEN __grail_wide(typeof(a), typeof(b)) AND __grail_outside(a, b)
                     THEN CAST(CASE WHEN a = b THEN 0 END AS INTEGER)
                 ELSE __grail_py_hops_int(TRY_CAST(a AS BIGINT), TRY_CAST(b AS BIGINT),
                                          CAST(index_name AS VARCHAR))
            END
        WHEN 'null' THEN CAST(NULL AS INTEGER)
        ELSE __grail_type_error(typeof(a), typeof(b)) END;

-- reaches_path(src, dst [, index_name]): one shortest path src -> dst as a list of keys, src
-- first and dst last, every consecutive pair an edge of the table (the smallest such list, key
-- by key); NULL when there is none or a key is NULL, [x] for x -> x. The list holds keys of the
-- arguments' type (cast_to_type: each branch of the CASE must have the one type).
CREATE OR REPLACE TEMP MACRO __grail_path(a, b, index_name) AS
    CASE __grail_pair_kind(typeof(a), typeof(b))
        WHEN 'str' THEN cast_to_type(__grail_py_path_str(CAST(a AS VARCHAR), CAST(b AS VARCHAR),
                                                         CAST(index_name AS VARCHAR)),
                                     [coalesce(a, b)])
        WHEN 'int' THEN
            CASE WHEN __grail_wide(typeof(a), typeof(b)) AND __grail_outside(a, b)
                     THEN CASE WHEN a = b THEN [coalesce(a, b)]
                               ELSE cast_to_type(NULL, [coalesce(a, b)]) END
                 ELSE cast_to_type(__grail_py_path_int(TRY_CAST(a AS BIGINT),
                                                       TRY_CAST(b AS BIGINT),
                                                       CAST(index_name AS VARCHAR)),
                                   [coalesce(a, b)])
            END
        WHEN 'null' THEN cast_to_type(NULL, [coalesce(a, b)])
        ELSE __grail_type_error(typeof(a), typeof(b)) END;

CREATE OR REPLACE TEMP MACRO reaches_path(a, b) AS __grail_path(a, b, ''),
    (a, b, index_name) AS __grail_path(a, b, index_name);

-- reaches_within(src, dst, k [, index_name]): is there a directed path src -> dst of at most k
-- edges? NULL when a key or k is NULL; x -> x is true for k >= 0; a negative k is false.
CREATE OR REPLACE TEMP MACRO reaches_within(a, b, k) AS
    CASE __grail_pair_kind(typeof(a), typeof(b))
        WHEN 'str' THEN __grail_py_within_str(CAST(a AS VARCHAR), CAST(b AS VARCHAR),
                                              CAST(k AS BIGINT), '')
        WHEN 'int' THEN
            CASE WHEN __grail_wide(typeof(a), typeof(b)) AND __grail_outside(a, b)
                     THEN CASE WHEN a IS NOT NULL AND b IS NOT NULL AND k IS NOT NULL
                               THEN a = b AND CAST(k AS BIGINT) >= 0 END
                 ELSE __grail_py_within_int(TRY_CAST(a AS BIGINT), TRY_CAST(b AS BIGINT),
                                            CAST(k AS BIGINT), '')
            END
        WHEN 'null' THEN CAST(NULL AS BOOLEAN)
        ELSE __grail_type_error(typeof(a), typeof(b)) END,
    (a, b, k, index_name) AS
    CASE __grail_pair_kind(typeof(a), typeof(b))
        WHEN 'str' THEN __grail_py_within_str(CAST(a AS VARCHAR), CAST(b AS VARCHAR),
                                              CAST(k AS BIGINT), CAST(index_name AS VARCHAR))
        WHEN 'int' THEN
            CASE WHEN __grail_wide(typeof(a), typeof(b)) AND __grail_outside(a, b)
                     THEN CASE WHEN a IS NOT NULL AND b IS NOT NULL AND k IS NOT NULL
                               THEN a = b AND CAST(k AS BIGINT) >= 0 END
                 ELSE __grail_py_within_int(TRY_CAST(a AS BIGINT), TRY_CAST(b AS BIGINT),
                                            CAST(k AS BIGINT), CAST(index_name AS VARCHAR))
            END
        WHEN 'null' THEN CAST(NULL AS BOOLEAN)
        ELSE __grail_type_error(typeof(a), typeof(b)) END;

-- grail_reach_counts(name [, mode, precision]): for every vertex of the index named name (or of
-- the index of the table name), how many vertices it reaches and how many reach it, itself
-- excluded (a vertex of a strongly connected component of k vertices counts its k - 1 others):
-- key, reaches, reached_by, mode ('exact' or 'approximate': which ran; mode := 'auto' counts
-- exactly where the work allows), rel_error (0 when exact, else the HyperLogLog sketches'
-- relative standard error, 1.04 / sqrt(2^precision)).
CREATE OR REPLACE TEMP MACRO grail_reach_counts(name, mode := 'auto', precision := 8) AS TABLE
    SELECT * FROM query_table(__grail_py_reach_counts_source(CAST(name AS VARCHAR),
                                                              CAST(mode AS VARCHAR),
                                                              CAST(precision AS BIGINT)));

-- grail_index(table [, src, dst, labels, name, path, rebuild, auto_rebuild]): build the index
-- of an edge table (or load the persisted one while it is fresh) and return a one-row summary.
-- As a scalar: SELECT grail_index('cites'); as a table: SELECT * FROM grail_index('cites').
-- auto_rebuild NULL keeps the index's own setting (recorded with its file; false when new).
CREATE OR REPLACE TEMP MACRO grail_index(table_name, src := 'src', dst := 'dst', labels := NULL,
                                         name := '', path := '', rebuild := false,
                                         auto_rebuild := NULL) AS
    __grail_py_index(table_name, src, dst, labels, name, path, rebuild, auto_rebuild,
                     __grail_session());

CREATE OR REPLACE TEMP MACRO grail_index(table_name, src := 'src', dst := 'dst', labels := NULL,
                                         name := '', path := '', rebuild := false,
                                         auto_rebuild := NULL) AS TABLE
    WITH built AS MATERIALIZED (
        SELECT __grail_py_index(table_name, src, dst, labels, name, path, rebuild,
                                auto_rebuild, __grail_session()) AS s)
    SELECT unnest(s) FROM built;  -- materialized: the build runs once, not once per field

-- grail_indexes(): the indices this database knows in this process, one row each.
CREATE OR REPLACE TEMP MACRO grail_indexes() AS TABLE
    WITH listed AS MATERIALIZED (SELECT __grail_py_indexes() AS l)
    SELECT unnest(l, max_depth := 2) FROM listed;
