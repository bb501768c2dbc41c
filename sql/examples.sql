-- Analytic queries over a citation graph, run by `python -m grail_duckdb demo` and by
-- examples/citation_analytics.py. They expect:
--   cites(citing, cited)   one row per citation: paper `citing` cites the earlier paper `cited`
--   papers(id)             every paper (a view over both columns of cites)
-- and an index built with SELECT grail_index('cites', src := 'citing', dst := 'cited').
-- reaches(a, b) is then "a builds on b": a chain of citations leads from a to b, and
-- ancestors(b) is every paper that builds on b (b itself included).
-- Each query starts with a `-- name:` line; $paper is a parameter (the subject paper, the answer
-- of most_cited). A query named x_cte is x written with DuckDB's recursive CTE instead of the
-- index, for comparison (same answer, one graph walk per starting paper).

-- name: most_cited
-- The subject of the next queries: the paper cited most often (directly).
SELECT cited AS paper, count(*) AS direct_citations
FROM cites GROUP BY cited ORDER BY direct_citations DESC, paper LIMIT 1;

-- name: builds_on
-- How many papers transitively build on the subject paper (cite it, or cite a paper that does...):
-- one traversal of the index.
SELECT count(*) AS papers_building_on_it FROM ancestors($paper) WHERE key <> $paper;

-- name: builds_on_cte
WITH RECURSIVE later(id) USING KEY (id) AS (
    SELECT id FROM papers WHERE id = $paper
    UNION
    SELECT c.citing FROM later JOIN cites AS c ON c.cited = later.id)
SELECT count(*) - 1 AS papers_building_on_it FROM later;

-- name: most_influential
-- Among the 20 most cited papers, the ones that most other papers transitively build on
-- (counted over a fixed sample of one paper in 10): one whole-column call for the grid.
WITH candidates AS (
    SELECT cited AS paper FROM cites GROUP BY cited ORDER BY count(*) DESC, cited LIMIT 20),
sample AS (SELECT id FROM papers WHERE hash(id) % 10 = 0)
SELECT paper, count(*) FILTER (WHERE reaches(id, paper) AND id <> paper) AS influenced
FROM (SELECT c.paper, s.id FROM candidates AS c CROSS JOIN sample AS s) AS grid
GROUP BY paper ORDER BY influenced DESC, paper LIMIT 10;

-- name: most_influential_cte
WITH RECURSIVE candidates AS (
    SELECT cited AS paper FROM cites GROUP BY cited ORDER BY count(*) DESC, cited LIMIT 20),
sample AS (SELECT id FROM papers WHERE hash(id) % 10 = 0),
later(paper, id) USING KEY (paper, id) AS (
    SELECT paper, paper FROM candidates
    UNION
    SELECT l.paper, c.citing FROM later AS l JOIN cites AS c ON c.cited = l.id)
SELECT paper, count(*) FILTER (WHERE id IN (SELECT id FROM sample) AND id <> paper) AS influenced
FROM later GROUP BY paper ORDER BY influenced DESC, paper LIMIT 10;

-- name: cocited_connected
-- Pairs of papers cited together by one paper (a sample: one citing paper in 50): how many
-- are linked by a chain of citations, one building on the other?
WITH cocited AS (
    SELECT DISTINCT c1.cited AS a, c2.cited AS b
    FROM cites AS c1 JOIN cites AS c2 ON c1.citing = c2.citing AND c1.cited < c2.cited
    WHERE hash(c1.citing) % 50 = 0)
SELECT count(*) AS pairs,
       count(*) FILTER (WHERE reaches(a, b) OR reaches(b, a)) AS linked
FROM cocited;

-- name: cocited_connected_cte
WITH RECURSIVE cocited AS (
    SELECT DISTINCT c1.cited AS a, c2.cited AS b
    FROM cites AS c1 JOIN cites AS c2 ON c1.citing = c2.citing AND c1.cited < c2.cited
    WHERE hash(c1.citing) % 50 = 0),
starts AS (SELECT a AS s FROM cocited UNION SELECT b FROM cocited),
walk(s, v) USING KEY (s, v) AS (
    SELECT s, s FROM starts
    UNION
    SELECT w.s, c.cited FROM walk AS w JOIN cites AS c ON c.citing = w.v)
SELECT count(*) AS pairs,
       count(*) FILTER (WHERE (a, b) IN (SELECT (s, v) FROM walk)
                           OR (b, a) IN (SELECT (s, v) FROM walk)) AS linked
FROM cocited;
