-- The SQL surface of grail_duckdb, created by grail_duckdb.install(con) on each connection.
--
-- The macros are TEMP (they live in the connection's temp schema, so nothing is written into a
-- database file); the Python functions they call (__grail_*) are registered once per database
-- and shared by all its connections and cursors. DuckDB has no ANY parameter type, so the
-- macros pick the integer or the VARCHAR implementation from typeof(): typeof is a constant of
-- the argument's type, so the CASE is folded away when the query is planned.

-- 'int', 'str', 'null' or 'other' for a DuckDB type name (the result of typeof).
CREATE OR REPLACE TEMP MACRO __grail_kind(t) AS
    CASE WHEN t = 'VARCHAR' THEN 'str'
         WHEN t IN ('TINYINT', 'SMALLINT', 'INTEGER', 'BIGINT',
                    'UTINYINT', 'USMALLINT', 'UINTEGER', 'UBIGINT') THEN 'int'
         WHEN t = '"NULL"' THEN 'null'
         ELSE 'other' END;

-- The key kind shared by the types of a (src, dst) pair: a NULL literal takes the other's kind,
-- two different kinds give 'bad'.
CREATE OR REPLACE TEMP MACRO __grail_pair_kind(ta, tb) AS
    CASE WHEN __grail_kind(ta) = __grail_kind(tb) THEN __grail_kind(ta)
         WHEN __grail_kind(ta) = 'null' THEN __grail_kind(tb)
         WHEN __grail_kind(tb) = 'null' THEN __grail_kind(ta)
         ELSE 'bad' END;

CREATE OR REPLACE TEMP MACRO __grail_key_error(ta, tb) AS
    error('reaches: vertex keys must both be integers or both VARCHAR, got ' || ta || ' and '
          || tb || '; cast them to the key type of the edge table');

-- reaches(src, dst [, index_name]): is there a directed path src -> dst?
-- NULL -> NULL, x reaches x, a key that is no vertex reaches nothing. Without index_name (or
-- with '') the only index of the database answers; the two-argument form calls a two-argument
-- function, so DuckDB converts no per-row name column for each chunk.
CREATE OR REPLACE TEMP MACRO reaches(a, b) AS
    CASE __grail_pair_kind(typeof(a), typeof(b))
        WHEN 'str' THEN __grail_reaches_str_only(CAST(a AS VARCHAR), CAST(b AS VARCHAR))
        WHEN 'int' THEN __grail_reaches_int_only(CAST(a AS BIGINT), CAST(b AS BIGINT))
        WHEN 'null' THEN __grail_reaches_int_only(CAST(a AS BIGINT), CAST(b AS BIGINT))
        ELSE __grail_key_error(typeof(a), typeof(b)) END,
    (a, b, index_name) AS
    CASE __grail_pair_kind(typeof(a), typeof(b))
        WHEN 'str' THEN __grail_reaches_str(CAST(a AS VARCHAR), CAST(b AS VARCHAR), index_name)
        WHEN 'int' THEN __grail_reaches_int(CAST(a AS BIGINT), CAST(b AS BIGINT), index_name)
        WHEN 'null' THEN __grail_reaches_int(CAST(a AS BIGINT), CAST(b AS BIGINT), index_name)
        ELSE __grail_key_error(typeof(a), typeof(b)) END;

-- The whole-column form: two lists of keys in, one list of answers out, one engine call.
CREATE OR REPLACE TEMP MACRO reaches_list(a, b, index_name := '') AS
    CASE __grail_pair_kind(typeof(a[1]), typeof(b[1]))
        WHEN 'str' THEN __grail_reaches_list_str(CAST(a AS VARCHAR[]), CAST(b AS VARCHAR[]), index_name)
        WHEN 'int' THEN __grail_reaches_list_int(CAST(a AS BIGINT[]), CAST(b AS BIGINT[]), index_name)
        WHEN 'null' THEN __grail_reaches_list_int(CAST(a AS BIGINT[]), CAST(b AS BIGINT[]), index_name)
        ELSE __grail_key_error(typeof(a[1]), typeof(b[1])) END;

-- reaches_pairs(table_name, src_column, dst_column [, index_name]): every row of a table or
-- view as (src, dst, reaches), the whole column answered in one engine call (list aggregation,
-- one call, unnest). The names are looked up as names (query_table, struct_extract), never
-- spliced into SQL text.
CREATE OR REPLACE TEMP MACRO reaches_pairs(table_name, src_column, dst_column, index_name := '') AS TABLE
    SELECT unnest(p.s) AS src, unnest(p.d) AS dst,
           unnest(reaches_list(p.s, p.d, index_name)) AS reaches
    FROM (SELECT list(struct_extract(r, src_column)) AS s,
                 list(struct_extract(r, dst_column)) AS d
          FROM query_table(table_name) AS r) AS p;

-- grail_index(table [, src, dst, labels, name, path, rebuild]): build the index of an edge table
-- (or load the persisted one while it is fresh) and return a one-row summary. As a scalar:
-- SELECT grail_index('cites'); as a table: SELECT * FROM grail_index('cites').
CREATE OR REPLACE TEMP MACRO grail_index(table_name, src := 'src', dst := 'dst', labels := NULL,
                                         name := '', path := '', rebuild := false) AS
    __grail_index(table_name, src, dst, labels, name, path, rebuild);

CREATE OR REPLACE TEMP MACRO grail_index(table_name, src := 'src', dst := 'dst', labels := NULL,
                                         name := '', path := '', rebuild := false) AS TABLE
    WITH built AS MATERIALIZED (
        SELECT __grail_index(table_name, src, dst, labels, name, path, rebuild) AS s)
    SELECT unnest(s) FROM built;  -- materialized: the build runs once, not once per field

-- grail_indexes(): the indices this database knows in this process, one row each.
CREATE OR REPLACE TEMP MACRO grail_indexes() AS TABLE
    WITH listed AS MATERIALIZED (SELECT __grail_indexes() AS l)
    SELECT unnest(l, max_depth := 2) FROM listed;
