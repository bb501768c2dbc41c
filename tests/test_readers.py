"""read_edges on every format: small files written here, and the real files of the datasets."""
from __future__ import annotations

import gzip

import duckdb
import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

import grail_duckdb as gd
from benchmarks.datasets import DATASETS, available, load_dataset, lookup
from grail_duckdb.errors import EdgeInputError
from grail_duckdb.tools.readers import detect_format, read_edges
from benchmarks.workloads import vertex_keys

GRA = "graph_for_greach\n5\n0: 1 2 2 #\n1: 3 #\n2: #\n3: 1 #\n4: #\n"


def write(path, text, gz=False):
    """Write ``text`` to ``path`` (gzip-compressed when ``gz``) and return the path."""
    data = text.encode() if isinstance(text, str) else text
    path.write_bytes(gzip.compress(data) if gz else data)
    return path


def pairs(table):
    return list(zip(table["src"].to_pylist(), table["dst"].to_pylist()))


# --- .gra --------------------------------------------------------------------------------
@pytest.mark.parametrize("gz", [False, True])
def test_gra_edges_duplicates_and_vertex_count(tmp_path, gz):
    t = read_edges(write(tmp_path / ("g.gra.gz" if gz else "g.gra"), GRA, gz))
    assert pairs(t) == [(0, 1), (0, 2), (0, 2), (1, 3), (3, 1)]
    assert t.schema.metadata[b"grail.vertices"] == b"5"
    assert t.schema.field("src").type == pa.int64()


def test_gra_isolated_vertices_become_vertices_of_the_index(tmp_path):
    t = read_edges(write(tmp_path / "g.gra", GRA))
    idx = gd.build_index(t, backend="cpu")
    assert idx.summary()["vertices"] == 5
    assert idx.reaches([0, 4, 4, 3], [3, 4, 0, 1]).to_pylist() == [True, True, False, True]


def test_gra_crlf_and_trailing_blank_lines(tmp_path):
    text = GRA.replace("\n", "\r\n") + "\r\n\r\n"
    assert pairs(read_edges(write(tmp_path / "g.gra", text))) == pairs(
        read_edges(write(tmp_path / "h.gra", GRA)))


def test_gra_reverse_keeps_vertex_count(tmp_path):
    t = read_edges(write(tmp_path / "g.gra", GRA), reverse=True)
    assert pairs(t)[0] == (1, 0) and t.schema.metadata[b"grail.vertices"] == b"5"


def test_gra_empty_graph(tmp_path):
    t = read_edges(write(tmp_path / "g.gra", "graph_for_greach\n0\n"))
    assert t.num_rows == 0 and t.schema.metadata[b"grail.vertices"] == b"0"


@pytest.mark.parametrize("text, words", [
    ("graph_for_grail\n2\n0: #\n1: #\n", ["line 1", "graph_for_greach"]),
    ("0: 1 #\n1: #\n", ["line 1"]),
    ("graph_for_greach\ntwo\n0: #\n1: #\n", ["line 2", "vertex count"]),
    ("graph_for_greach\n3\n0: 1 #\n1: #\n", ["3 vertices", "2 adjacency lines"]),
    ("graph_for_greach\n2\n0: 1\n1: #\n", ["line 3"]),            # no '#'
    ("graph_for_greach\n2\n0: 1 #\n1 #\n", ["line 4"]),            # no ':'
    ("graph_for_greach\n2\n0: 1 #\n1: 0x #\n", ["line 4"]),        # a letter
    ("graph_for_greach\n3\n0: 1 #\n\n1: #\n2: #\n", ["line 4"]),   # a blank line inside
    ("graph_for_greach\n2\n0: 1 # 1\n1: #\n", ["line 3"]),         # text after '#'
    ("graph_for_greach\n2\n0: 1 : 2 #\n1: #\n", ["line 3"]),       # two ':'
    ("graph_for_greach\n2\n0: 1 #\n1: 2 #\n", ["line 4", "vertex 2"]),
    ("graph_for_greach\n2\n0: #\n7: #\n", ["line 4", "vertex 7"]),
    ("graph_for_greach\n2\n0: 1234567890123456789012 #\n1: #\n", ["line 3", "18 digits"]),
])
def test_gra_malformed(tmp_path, text, words):
    with pytest.raises(EdgeInputError) as err:
        read_edges(write(tmp_path / "bad.gra", text))
    for word in words:
        assert word in str(err.value)


# --- SNAP edge lists -----------------------------------------------------------------------
SNAP = "# Directed graph\n# FromNodeId\tToNodeId\n0\t1\n1 2\n\n  2\t\t0  \n5 6 0.25 # weight\n-3 4\n"


@pytest.mark.parametrize("gz", [False, True])
def test_snap_comments_blank_lines_extra_columns(tmp_path, gz):
    t = read_edges(write(tmp_path / ("g.txt.gz" if gz else "g.txt"), SNAP, gz))
    assert pairs(t) == [(0, 1), (1, 2), (2, 0), (5, 6), (-3, 4)]
    assert t.schema.field("dst").type == pa.int64()
    assert not t.schema.metadata


def test_snap_without_final_newline_and_comment_at_end(tmp_path):
    assert pairs(read_edges(write(tmp_path / "g.txt", "1 2\n3 4 # end"))) == [(1, 2), (3, 4)]
    assert pairs(read_edges(write(tmp_path / "h.txt", "1 2\n# only a comment"))) == [(1, 2)]
    assert read_edges(write(tmp_path / "e.txt", "# nothing\n")).num_rows == 0


@pytest.mark.parametrize("text, line", [
    ("1 2\n3\n", 2),
    ("# c\n1 2\nalice bob\n", 3),
    ("1 2\n3 4x\n", 2),
    ("1 2\n3 4.5\n", 2),
    ("1 2\n3 4\n5 6-7\n", 3),
])
def test_snap_malformed_names_the_line(tmp_path, text, line):
    with pytest.raises(EdgeInputError, match=f"line {line} "):
        read_edges(write(tmp_path / "bad.txt", text))


# --- TSV / CSV -----------------------------------------------------------------------------
def test_tsv_without_header_integers(tmp_path):
    t = read_edges(write(tmp_path / "g.tsv.gz", "0\t1\n0\t2\n2\t0\n", gz=True))
    assert pairs(t) == [(0, 1), (0, 2), (2, 0)] and t.schema.field("src").type == pa.int64()


def test_csv_header_picks_named_columns(tmp_path):
    p = write(tmp_path / "g.csv", "id,citing,cited\n1,10,20\n2,20,30\n")
    assert pairs(read_edges(p, src="citing", dst="cited")) == [(10, 20), (20, 30)]
    assert pairs(read_edges(p)) == [(1, 10), (2, 20)]                  # the first two columns
    assert pairs(read_edges(p, src="cited", dst="citing", reverse=True)) == [
        (10, 20), (20, 30)]
    with pytest.raises(EdgeInputError, match="no column 'cites'"):
        read_edges(p, src="cites", dst="cited")


def test_csv_src_dst_columns_preferred(tmp_path):
    p = write(tmp_path / "g.csv", "weight,dst,src\n5,1,2\n")
    assert pairs(read_edges(p)) == [(2, 1)]


def test_csv_text_keys_and_header_choice(tmp_path):
    p = write(tmp_path / "g.csv", "from,to\nalice,bob\nbob, carol\n")
    t = read_edges(p)
    assert pairs(t) == [("alice", "bob"), ("bob", "carol")]
    assert t.schema.field("src").type == pa.string()
    q = write(tmp_path / "h.csv", "alice,bob\nbob,carol\n")
    assert pairs(read_edges(q, header=False)) == [("alice", "bob"), ("bob", "carol")]


def test_csv_integer_column_with_a_bad_cell_is_refused_unless_text_is_asked(tmp_path):
    path = write(tmp_path / "g.csv", "src,dst\n1,2\n2,x7\n")
    with pytest.raises(EdgeInputError, match="line 3: 'x7' \\(column dst\\).*keys='str'"):
        read_edges(path)
    t = read_edges(path, keys="str")
    assert t.schema.field("dst").type == pa.string() and pairs(t) == [("1", "2"), ("2", "x7")]
    with pytest.raises(EdgeInputError, match="integer keys are needed"):
        read_edges(write(tmp_path / "w.csv", "src,dst\nx,y\n"), keys="int")
    t = read_edges(write(tmp_path / "m.csv", "src,dst\np1,p2\np2,3\n"))  # mostly text
    assert pairs(t) == [("p1", "p2"), ("p2", "3")]
    assert t.schema.metadata[b"grail.keys"] == b"text: line 2 holds 'p1', not an integer"


def test_csv_malformed_row_names_the_line(tmp_path):
    with pytest.raises(EdgeInputError, match="line 3 has 3 fields, expected 2"):
        read_edges(write(tmp_path / "g.csv", "1,2\n2,3\n3,4,5\n"))


# --- Parquet ---------------------------------------------------------------------------------
def test_parquet_columns(tmp_path):
    p = tmp_path / "g.parquet"
    pq.write_table(pa.table({"w": [1.0, 2.0], "src": pa.array([1, 2], pa.int32()),
                             "dst": pa.array([2, 3], pa.int16())}), p)
    t = read_edges(p)
    assert pairs(t) == [(1, 2), (2, 3)] and t.schema.field("dst").type == pa.int64()
    q = tmp_path / "h.parquet"
    pq.write_table(pa.table({"a": pa.array(["x", "y"]).dictionary_encode(), "b": ["y", "z"]}), q)
    assert pairs(read_edges(q)) == [("x", "y"), ("y", "z")]
    assert pairs(read_edges(q, src="b", dst="a")) == [("y", "x"), ("z", "y")]
    with pytest.raises(EdgeInputError, match="integers or text"):
        read_edges(p, src="w", dst="src")


# --- DuckDB tables ---------------------------------------------------------------------------
ODD = 'my "odd" table; x'
INJECTIONS = ['cites; DROP TABLE cites; --', 'cites"; DROP TABLE cites; --',
              "cites' OR 1=1 --", 'main.cites']


@pytest.fixture
def database(tmp_path):
    path = tmp_path / "g.duckdb"
    con = duckdb.connect(str(path))
    con.execute("CREATE TABLE cites (citing BIGINT, cited BIGINT)")
    con.execute("INSERT INTO cites VALUES (1, 2), (2, 3)")
    con.execute('CREATE TABLE "my ""odd"" table; x" (src VARCHAR, dst VARCHAR)')
    con.execute('INSERT INTO "my ""odd"" table; x" VALUES (\'a\', \'b\')')
    con.close()
    return path


def test_duckdb_table(database):
    t = read_edges(f"{database}:cites")
    assert pairs(t) == [(1, 2), (2, 3)] and t.schema.field("src").type == pa.int64()
    assert pairs(read_edges(f"{database}:cites", src="cited", dst="citing")) == [
        (2, 1), (3, 2)]
    assert detect_format(f"{database}:cites") == "duckdb"


def test_duckdb_odd_table_name_is_quoted(database):
    t = read_edges(f"{database}:{ODD}")
    assert pairs(t) == [("a", "b")] and t.schema.field("src").type == pa.string()


@pytest.mark.parametrize("name", INJECTIONS)
def test_duckdb_injection_fails_without_harm(database, name):
    with pytest.raises(EdgeInputError, match="has no table"):
        read_edges(f"{database}:{name}")
    con = duckdb.connect(str(database), read_only=True)
    assert con.execute("SELECT count(*) FROM cites").fetchone()[0] == 2
    con.close()


def test_duckdb_missing_database_and_table(tmp_path, database):
    with pytest.raises(EdgeInputError, match="does not exist"):
        read_edges(f"{tmp_path / 'none.duckdb'}:cites")
    with pytest.raises(EdgeInputError, match="its tables are"):
        read_edges(f"{database}:citations")


# --- errors common to all formats --------------------------------------------------------------
def test_missing_file_and_unknown_format(tmp_path):
    with pytest.raises(EdgeInputError, match="does not exist"):
        read_edges(tmp_path / "none.gra")
    with pytest.raises(EdgeInputError, match="cannot tell the format") as err:
        read_edges(write(tmp_path / "g.dat", "a;b\n"))
    assert "fmt=" in str(err.value)
    assert pairs(read_edges(write(tmp_path / "g.cites", "1 2\n"))) == [(1, 2)]   # told by content
    assert pairs(read_edges(tmp_path / "g.cites", fmt="snap")) == [(1, 2)]
    with pytest.raises(EdgeInputError, match="unknown edge file format"):
        read_edges(tmp_path / "g.cites", fmt="xml")


# --- the real files ----------------------------------------------------------------------------
def _gra_lines(path):
    """Independent count of a .gra file: header n, number of adjacency lines, of targets."""
    with gzip.open(path, "rt") as f:
        lines = f.read().split("\n")
    body = [ln for ln in lines[2:] if ln.strip()]
    return int(lines[1]), len(body), sum(len(ln.split()) - 2 for ln in body)


@pytest.mark.datasets
@pytest.mark.parametrize("name", list(DATASETS))
def test_real_files_match_the_readme_counts(datasets_dir, name):
    spec = DATASETS[name]
    if not spec.file(datasets_dir).is_file():
        pytest.skip(f"{spec.path} is absent")
    t = load_dataset(name)
    assert t.column_names == ["src", "dst"] and t.schema.field("src").type == pa.int64()
    keys = vertex_keys(t)
    if spec.vertices is not None:
        assert (len(keys), t.num_rows) == (spec.vertices, spec.edges)
    if spec.fmt == "gra":
        n, lines, targets = _gra_lines(spec.file(datasets_dir))
        assert int(t.schema.metadata[b"grail.vertices"]) == n == lines == len(keys)
        assert t.num_rows == targets
        assert np.array_equal(keys.to_numpy(), np.arange(n))
        if spec.vertices is None:                  # the README's range for the small set
            assert 3_600 <= n <= 39_000 and 3_900 <= t.num_rows <= 40_000


@pytest.mark.datasets
def test_cora_is_read_reversed(datasets_dir):
    if "cora" not in available():
        pytest.skip("cora is absent")
    with gzip.open(DATASETS["cora"].file(datasets_dir), "rt") as f:
        cited, citing = map(int, f.readline().split())
    assert pairs(load_dataset("cora"))[0] == (citing, cited)
    assert lookup("cora.cites") is DATASETS["cora"] and lookup("UNIPROT") is DATASETS["uniprot"]


@pytest.mark.parametrize("text", [
    "1\t2\n3\t4\n",                      # plain: the pyarrow.csv path
    "# header\n1 2\n3 4\r\n",
    "1  2\n3 4\n",                        # two spaces: the NumPy lexer
    "1\t2\n# inner comment\n3\t4\n",
    "1 2\n3\t4\n",
])
def test_snap_both_paths_agree(tmp_path, text):
    assert pairs(read_edges(write(tmp_path / "g.txt", text))) == [(1, 2), (3, 4)]


# --- format told by content; DuckDB for irregular edge lists (issue 11, item 15) ---------------
@pytest.mark.parametrize("name, text, expected", [
    ("g.data", GRA, [(0, 1), (0, 2), (0, 2), (1, 3), (3, 1)]),
    ("g.data", "a,b\n1,2\n", [(1, 2)]),
    ("g.data", "# c\n5\t6\n7 8\n", [(5, 6), (7, 8)]),
    ("g.cites.gz", "35\t1033\n35\t103482\n", [(35, 1033), (35, 103482)]),
])
def test_format_told_by_content(tmp_path, name, text, expected):
    path = write(tmp_path / name, text, gz=name.endswith(".gz"))
    assert pairs(read_edges(path)) == expected


@pytest.mark.datasets
def test_cora_needs_no_format(datasets_dir):
    path = datasets_dir / "snap" / "cora.cites.gz"
    if not path.is_file():
        pytest.skip("cora is absent")
    assert detect_format(path) == "snap"
    t = read_edges(path, reverse=True)              # the file lists cited citing
    assert pairs(t) == pairs(load_dataset("cora")) and t.num_rows == 5_429


def test_fractional_keys_are_never_rounded(tmp_path):
    with pytest.raises(EdgeInputError, match="line 2: '4.5'"):   # a bad cell, never rounded
        read_edges(write(tmp_path / "g.tsv", "1\t2\n3\t4.5\n"))
    t = read_edges(tmp_path / "g.tsv", keys="str")
    assert pairs(t) == [("1", "2"), ("3", "4.5")]   # text keys, as written
    with pytest.raises(EdgeInputError, match="line 2 "):
        read_edges(write(tmp_path / "g.txt", "1  2\n3  4.5\n5  1e3\n"))
    with pytest.raises(EdgeInputError, match="line 3 .*64-bit"):
        read_edges(write(tmp_path / "h.txt", "1  2\n\n3  99999999999999999999\n"))


def test_irregular_edge_list_at_scale(tmp_path):
    """Runs of spaces, inner comments, CRLF: DuckDB's path; the same edges as a plain file,
    and a bad line deep inside is named."""
    rng = np.random.default_rng(0)
    edges = rng.integers(0, 50_000, (200_000, 2))
    plain = "".join(f"{a}\t{b}\n" for a, b in edges)
    lines = [f"  {a}   {b}\r\n" if i % 3 else f"{a} {b} 0.5 # w\n"
             for i, (a, b) in enumerate(edges)]
    lines.insert(1000, "# a comment in the middle\n")
    t_plain = read_edges(write(tmp_path / "plain.txt", plain))
    t_odd = read_edges(write(tmp_path / "odd.txt.gz", "".join(lines), gz=True))
    assert t_odd.equals(t_plain) and t_plain.num_rows == 200_000
    lines[150_000] = "7 eight\n"
    with pytest.raises(EdgeInputError, match="line 150001 holds a field that is not an integer"):
        read_edges(write(tmp_path / "bad.txt", "".join(lines)))


def test_ragged_row_deep_in_a_large_tsv_is_named(tmp_path):
    rows = [f"{i}\t{i + 1}" for i in range(300_000)]
    rows[250_000] = "1\t2\t3"
    with pytest.raises(EdgeInputError, match="line 250001 has 3 fields, expected 2"):
        read_edges(write(tmp_path / "g.tsv", "\n".join(rows) + "\n"))
