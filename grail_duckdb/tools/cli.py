"""The command line: ``python -m grail_duckdb build|query|demo``.

* ``build EDGES``: index an edge file (Parquet, CSV/TSV, SNAP text, ``.gra``, gzip or not, or
  ``file.duckdb:table``) and write the index next to it;
* ``query INDEX PAIRS``: answer a file of pairs with a saved index; answers to Parquet or CSV;
* ``demo``: a seeded citation-like graph (or ``--edges FILE``) in an in-memory DuckDB, the index
  built through SQL, the example queries of ``sql/examples.sql`` as plain SQL beside DuckDB's
  recursive CTE (and, with ``--scalar``, the per-chunk path), with answers and warm timings
  (``--write-edges`` keeps the graph as a file).

The benchmark is not part of the package: ``python -m benchmarks`` in a checkout
(docs/benchmarks.md).

Work that runs longer than 2 s shows a progress line on stderr (:mod:`grail_duckdb.progress`;
``GRAIL_DUCKDB_PROGRESS=0`` silences it). Every input error (a missing or malformed file, an
option out of range, an output that cannot be written, a stale or corrupt index, mismatched
key types) is one message on stderr and exit status 2.
"""
from __future__ import annotations

import argparse
import os
import re
import sys
import time
from pathlib import Path

import duckdb
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.csv as pacsv
import pyarrow.parquet as pq

from .. import plugin
from ..engine.build import DEFAULT_LABELS, MAX_LABELS, build_index
from ..engine.index import load_index
from ..indexfile import IndexWriter, read_metadata
from ..engine.warm import to_compile, warm_up
from ..engine.append import COMPACT_SHARE, parts_share
from ..errors import EdgeInputError, GrailError, IndexFileError, NotAppendableError
from ..progress import step
from .examples import citation_connection, each_example
from .generators import citation_dag
from .edge_text import HEADER_META, KEYS_META
from .readers import detect_format, duckdb_target, parquet_edge_columns, read_edges

#: suffixes dropped from an edge file's name to name its index (``cit-HepTh.tsv.gz`` ->
#: ``cit-HepTh.grail.parquet``)
_EDGE_SUFFIXES = {".gz", ".tsv", ".csv", ".txt", ".gra", ".parquet", ".cites", ".edges"}
#: the demo's graph: the recursive CTEs beside the index take seconds (some are stopped)
DEMO_PAPERS = 50_000
#: seconds after which the demo stops a recursive CTE
DEMO_CTE_BUDGET = 1.0
#: the kernels the demo compiles ahead (:data:`grail_duckdb.engine.warm.PARTS`): those of its
#: generated citations' build, or of any graph's (``--edges``), and the queries'
DEMO_PARTS = ("citations", "query")
DEMO_FILE_PARTS = ("build", "query")
#: the library's messages name Python keywords; the command line names its flags
_FLAGS = {"fmt": "--format", "src": "--src", "dst": "--dst", "labels": "--labels",
          "reverse=True": "--reverse", "keys='str'": "--string-keys", "header=False": "--no-header"}
#: where ``build`` records the input file an index was built from (``source.input``)
INPUT_KEY = "input"


def _say(*parts) -> None:
    print(*parts, flush=True)


def default_index_path(edges: str) -> Path:
    """Where ``build`` writes the index of an edge file: beside it, ``<stem>.grail.parquet``
    (a folder of Parquet files: beside the folder).

    >>> default_index_path("data/cit-HepTh.tsv.gz").as_posix()
    'data/cit-HepTh.grail.parquet'
    """
    p = Path(edges)
    if not p.name:  # '.', '..', '/': the folder's own name
        p = p.resolve()
    name = p.name
    while Path(name).suffix.lower() in _EDGE_SUFFIXES:
        name = name[: -len(Path(name).suffix)]
    return p.with_name(f"{name}.grail.parquet")


def writable(path, what: str) -> Path:
    """``path`` checked before any work: its folder exists and may be written, and it is not
    a folder itself (an EdgeInputError that names it otherwise)."""
    p = Path(path)
    folder = p.parent if str(p.parent) else Path(".")
    if p.is_dir():
        raise EdgeInputError(f"cannot write the {what} to {str(p)!r}: it is a folder")
    if not folder.is_dir():
        raise EdgeInputError(f"cannot write the {what} to {str(p)!r}: the folder "
                             f"{str(folder)!r} does not exist (or is not a folder)")
    if not os.access(folder, os.W_OK) or (p.exists() and not os.access(p, os.W_OK)):
        raise EdgeInputError(f"cannot write the {what} to {str(p)!r}: permission denied")
    return p


# --- build ---------------------------------------------------------------------------------------
def cmd_build(args) -> int:
    """Build and save the index of an edge file (or of a table of a DuckDB file); with
    ``--append FILE``, absorb FILE's edges into the saved index instead (:func:`cmd_append`)."""
    if args.append:
        return cmd_append(args)
    target = duckdb_target(args.edges) if not Path(args.edges).exists() else None
    if target is not None:
        return _build_in_database(*target, args)
    out = writable(args.out if args.out else default_index_path(args.edges), "index")
    _check_index_target(out, args.edges, explicit=bool(args.out))
    writer = IndexWriter(out, source={INPUT_KEY: Path(args.edges).resolve().name})
    t0 = time.perf_counter()
    try:
        with step(f"reading {args.edges}"):
            edges, cols = read_edges_for_build(args)
    except BaseException:
        writer.discard()
        raise
    if isinstance(edges, pa.Table):
        _say(f"read {edges.num_rows:,} edges from {args.edges} in "
             f"{time.perf_counter() - t0:.2f} s{_read_notes(edges, args)}")
    # the file is written as the build goes (its children during the labels: the ETL path)
    index = build_index(edges, labels=args.labels, seed=args.seed, backend=args.backend,
                        save_to=writer, **cols)
    _print_summary(index.summary(), f"{out} ({Path(out).stat().st_size / 2**20:,.1f} MiB; the "
                   f"last {index.build_seconds.get('save', 0.0):.2f} s after the labels)")
    return 0


def _read_notes(edges: pa.Table, args) -> str:
    """What the reader chose for a text file: its header row, its key type and why."""
    meta = edges.schema.metadata or {}
    notes = []
    if HEADER_META in meta and args.header is None and meta.get(KEYS_META) != b"integer":
        notes.append(f"the first row, {meta[HEADER_META].decode()!r}, taken as the header: "
                     "--no-header if it is an edge")
    if KEYS_META in meta:
        notes.append(f"keys: {meta[KEYS_META].decode()}")
    return "".join(f"\n  {n}" for n in notes)


def _check_index_target(out: Path, edges: str, explicit: bool) -> None:
    """Refuse to replace an index of another input (two inputs of one stem, e.g. e.parquet and
    e.csv, share the default e.grail.parquet), with the fix."""
    if not out.exists():
        return
    try:
        meta = read_metadata(out)
    except IndexFileError:
        return  # not an index: the writer refuses it (or replaces a damaged index of ours)
    recorded = meta.source.get(INPUT_KEY)
    if "table" in meta.source:
        recorded = f"table {meta.source['table']} of a database"
    this = Path(edges).resolve().name
    if recorded is None or recorded == this:
        return
    other = out.with_name(f"{this}.grail.parquet")
    raise EdgeInputError(
        f"{out} holds the index of {recorded}, not of {this}; it is not replaced: write this "
        f"one elsewhere, e.g. --out {other}" + ("" if explicit else
                                                f", or delete {out} first"))


def cmd_append(args) -> int:
    """``build EDGES --append NEW``: the edges of NEW (new papers citing older ones or each
    other) absorbed by the index of EDGES without a rebuild and written beside it as a part
    (:mod:`grail_duckdb.engine.append`); NEW's rows belong to EDGES from then on (put them
    there: a plain ``build EDGES`` rebuilds from it, and folds the parts in)."""
    path = Path(args.out) if args.out else default_index_path(args.edges)
    if not path.is_file():
        raise EdgeInputError(f"--append needs the index of {args.edges} at {path}; build it "
                             f"first (python -m grail_duckdb build {args.edges})")
    writable(path, "index")
    with step(f"loading {path}"):
        index = load_index(path, backend=args.backend)
    with step(f"reading {args.append}"):
        new = read_edges(args.append, fmt=args.format, src=args.src, dst=args.dst,
                         reverse=args.reverse)
    t0 = time.perf_counter()
    try:
        grown = index.append(new)
    except NotAppendableError as exc:
        raise EdgeInputError(f"{args.append} cannot be appended: {exc} (add its rows to "
                             f"{args.edges} and build again)") from None
    parts = grown.save_parts()
    seconds = time.perf_counter() - t0
    batch = grown.appended[-1] if parts else None
    _say(f"appended {args.append}: +{batch.vertices if batch else 0:,} vertices, "
         f"+{new.num_rows:,} edges in {seconds:.3f} s (absorbed and written, no rebuild)")
    _print_summary(grown.summary(), parts[-1] if parts else path)
    share = parts_share(grown)
    if share > COMPACT_SHARE:
        _say(f"the appended parts hold {share:.0%} of the index's edges (over "
             f"{COMPACT_SHARE:.0%}): rebuild with the appended rows in {args.edges} to fold "
             "them in (python -m grail_duckdb build ...)")
    return 0


def read_edges_for_build(args):
    """The edges of ``build`` and their column names: Parquet (a file or a folder) is handed
    to the build as a path, which reads it row group by row group on every core while it
    uploads (the ``read`` phase); other formats are read first (:func:`read_edges`)."""
    fmt = args.format or detect_format(args.edges)
    if fmt in ("parquet", "pq") and not args.reverse:
        src, dst = parquet_edge_columns(args.edges, args.src, args.dst)
        return str(args.edges), {"src": src, "dst": dst}
    return read_edges(args.edges, fmt=args.format, src=args.src, dst=args.dst,
                      reverse=args.reverse, header=args.header,
                      keys="str" if args.string_keys else None), {}


def _build_in_database(db: str, table: str, args) -> int:
    """``file.duckdb:table``: build through the plugin, so SQL on that database finds it. The
    database is opened read-only (the index is a file beside it) and must exist."""
    if not Path(db).is_file():
        raise EdgeInputError(f"DuckDB database {db!r} does not exist (or is not a file)")
    if args.out:
        writable(args.out, "index")
    elif not os.access(Path(db).resolve().parent, os.W_OK):
        raise EdgeInputError(f"cannot write the index beside {db!r}: its folder may not be "
                             "written; name another file with --out")
    if args.backend:
        os.environ["GRAIL_DUCKDB_BACKEND"] = args.backend
    try:
        con = duckdb.connect(db, read_only=True)
    except duckdb.Error as exc:
        raise EdgeInputError(f"cannot open DuckDB database {db!r}: {exc}") from None
    try:
        with step(f"building the index of {db}:{table}"):
            summary = plugin.build(con, table, src=args.src or "src", dst=args.dst or "dst",
                                   labels=args.labels, name=args.name, path=args.out,
                                   rebuild=True, progress=False)
    finally:
        con.close()
    _print_summary(summary, summary["path"])
    return 0


def _print_summary(summary: dict, path) -> None:
    keys = ("vertices", "edges", "components", "dag_edges", "labels", "key_type", "backend",
            "build_seconds")
    _say(", ".join(f"{k} {summary[k]:,}" if isinstance(summary[k], int) else f"{k} {summary[k]}"
                   for k in keys if k in summary))
    _say(f"wrote {path}")


# --- query ---------------------------------------------------------------------------------------
def cmd_query(args) -> int:
    """Answer a pairs file with a saved index; write (src, dst, reaches)."""
    out = _answers_target(args) if args.out else None
    with step(f"loading {args.index}"):
        index = load_index(args.index, backend=args.backend)
    with step(f"reading {args.pairs}"):
        pairs = read_edges(args.pairs, fmt=args.format, src=args.src, dst=args.dst,
                           header=args.header, keys=index.key_kind)
    t0 = time.perf_counter()
    answers = index.reaches(pairs.column("src"), pairs.column("dst"))
    seconds = time.perf_counter() - t0
    table = pa.table({"src": pairs.column("src"), "dst": pairs.column("dst"),
                      "reaches": answers})
    print(f"{len(table):,} pairs, {index.last_stats.searched:,} searched, "
          f"{pc.sum(answers).as_py() or 0:,} reachable, {seconds:.3f} s", file=sys.stderr)
    with step(f"writing {out or 'the answers'}"):
        if out is None:
            pacsv.write_csv(table, sys.stdout.buffer)
        elif out.suffix == ".parquet":
            pq.write_table(table, out)
        else:
            pacsv.write_csv(table, out)
    return 0


_ANSWER_COLUMNS = ["src", "dst", "reaches"]


def _answers_target(args) -> Path:
    """``--out`` of ``query``, checked before any work: never the index, the pairs, a
    database or any other existing file but an answers file (what ``query`` writes)."""
    out = writable(args.out, "answers")
    if not out.exists():
        return out
    for what, given in (("index", args.index), ("pairs file", args.pairs)):
        if Path(given).exists() and out.resolve() == Path(given).resolve():
            raise EdgeInputError(f"--out {str(out)!r} is the {what} this query reads; it is not "
                                 "overwritten: name another answers file")
    if not _is_answers(out):
        raise EdgeInputError(
            f"--out {str(out)!r} exists and is not an answers file (columns src, dst, reaches): "
            "it may be an index, a database or data; it is not overwritten: name another file, "
            f"e.g. {out.with_name(out.stem + '.answers' + (out.suffix or '.csv'))}")
    return out


def _is_answers(path: Path) -> bool:
    """Whether a file is what ``query`` writes: Parquet or CSV with columns src, dst, reaches."""
    try:
        with open(path, "rb") as fh:
            head = fh.read(4096)
    except OSError:
        return False
    if head[:4] == b"PAR1":
        try:
            return pq.read_schema(path).names == _ANSWER_COLUMNS and not (
                pq.read_schema(path).metadata or {}).get(b"grail_duckdb.format")
        except Exception:  # pyarrow raises several types for damaged files
            return False
    first = head.split(b"\n", 1)[0].strip().replace(b'"', b"")
    return first == b"src,dst,reaches" or not head


# --- demo ----------------------------------------------------------------------------------------
def demo_connection(edges, *, index_path=None):
    """An in-memory DuckDB with ``cites(citing, cited)``, the ``papers`` view and the index
    built through SQL; returns ``(con, summary)``."""
    return citation_connection(edges, index_path=index_path)


def run_examples(con, *, scalar: bool = False, cte_budget: float = DEMO_CTE_BUDGET,
                 say=_say) -> dict:
    """Run the queries of ``sql/examples.sql`` on ``con`` as plain SQL (the plugin picks the
    path), warm, each beside its recursive-CTE twin (same rows, interrupted after
    ``cte_budget`` seconds) and, with ``scalar``, the per-chunk path; prints answers and
    timings and returns ``{name: rows}`` (the CTE twins' rows under ``<name>_cte``)."""
    results: dict = {}
    for rec in each_example(con, budget=cte_budget, per_chunk_too=scalar):
        name, rows = rec["name"], rec["rows"]
        doc = " ".join(line[3:] for line in rec["query"].splitlines() if line.startswith("-- "))
        results[name] = rows
        timing = f"{rec['seconds'] * 1000:8.1f} ms"
        if "per_chunk_seconds" in rec:
            timing += (f", per-chunk path {rec['per_chunk_seconds'] * 1000:.1f} ms "
                       f"({'same' if rec['per_chunk_same'] else 'DIFFERENT'} answer)")
            if not rec["per_chunk_same"]:
                raise GrailError(f"example {name}: the per-chunk and whole-column paths differ")
        if "cte_seconds" in rec:
            results[name + "_cte"] = rec["cte_rows"]
            if rec["cte_seconds"] is None:
                timing += (f"; recursive CTE stopped after {cte_budget:g} s (over "
                           f"{cte_budget / rec['seconds']:,.0f}x the index)")
            else:
                timing += (f"; recursive CTE {rec['cte_seconds'] * 1000:.1f} ms, "
                           f"{rec['cte_seconds'] / rec['seconds']:.0f}x the index "
                           f"({'equal' if rec['cte_same'] else 'UNEQUAL'} rows)")
                if not rec["cte_same"]:
                    raise GrailError(f"example {name}: the recursive CTE gives other rows")
        say(f"\n[{name}] {doc}")
        say(f"  {_rows_text(rows)}")
        say(f"  {timing} (warm)")
    return results


def _rows_text(rows, limit: int = 5) -> str:
    text = "; ".join(", ".join(str(v) for v in r) for r in rows[:limit])
    return text + (f"; ... ({len(rows)} rows)" if len(rows) > limit else "")


def cmd_demo(args) -> int:
    """The demo (the README's first command): generate (or read) a citation graph, index it,
    query it.
    The kernels are compiled (first run on a machine, on every core) or loaded first, so that
    no timing below includes it."""
    outs = [writable(p, "edges") for p in args.write_edges or []]
    if args.index:
        writable(args.index, "index")
    t_all = time.perf_counter()
    parts = DEMO_FILE_PARTS if args.edges else DEMO_PARTS
    if to_compile(parts):
        _say("first run on this machine: compiling the CPU kernels first (once; later runs "
             "load them from disk in a second or two)")
    seconds = warm_up(parts=parts)
    _say(f"kernels ready ({seconds:.1f} s)")
    if args.edges:
        t0 = time.perf_counter()
        with step(f"reading {args.edges}"):
            edges = read_edges(args.edges, reverse=args.reverse)
        _say(f"read {edges.num_rows:,} citations from {args.edges} "
             f"({time.perf_counter() - t0:.2f} s)")
    else:
        t0 = time.perf_counter()
        with step(f"generating a citation graph of {args.papers:,} papers"):
            edges = citation_dag(args.papers, seed=args.seed)
        _say(f"generated a citation graph: {args.papers:,} papers, {edges.num_rows:,} citations "
             f"(seed {args.seed}, {time.perf_counter() - t0:.2f} s)")
    for out in outs:
        with step(f"writing {out}"):
            write_edges(edges, out)
        _say(f"wrote the citations to {out}")
    t0 = time.perf_counter()
    con, summary = demo_connection(edges, index_path=args.index)
    _say(f"SELECT * FROM grail_index('cites', src := 'citing', dst := 'cited'): "
         f"{summary['vertices']:,} papers, {summary['components']:,} components, "
         f"backend {summary['backend']}, {time.perf_counter() - t0:.2f} s "
         f"(engine {summary['build_seconds']:.2f} s){', written to ' + summary['path'] if summary['path'] else ''}")
    try:
        run_examples(con, scalar=args.scalar, cte_budget=args.cte_budget)
    finally:
        con.close()
    _say(f"\ndemo finished in {time.perf_counter() - t_all:.1f} s")
    return 0


def write_edges(edges: pa.Table, path: Path) -> None:
    """The citations ``(citing, cited)`` as a file: Parquet, CSV or TSV by the suffix, or in
    a DuckDB database (``.duckdb``): table ``cites`` and view ``papers(id)``, the names
    ``sql/examples.sql`` expects (replaced when they exist)."""
    table = pa.table({"citing": edges.column("src"), "cited": edges.column("dst")})
    suffix = path.suffix.lower()
    if suffix in (".duckdb", ".ddb", ".db"):
        con = duckdb.connect(str(path))
        try:
            con.register("demo_edges", table)
            con.execute("CREATE OR REPLACE TABLE cites AS SELECT * FROM demo_edges")
            con.execute("CREATE OR REPLACE VIEW papers AS "
                        "SELECT citing AS id FROM cites UNION SELECT cited FROM cites")
        finally:
            con.close()
    elif suffix in (".csv", ".tsv"):
        pacsv.write_csv(table, path, write_options=pacsv.WriteOptions(
            delimiter="\t" if suffix == ".tsv" else ","))
    elif suffix == ".parquet":
        pq.write_table(table, path)
    else:
        raise EdgeInputError(f"--write-edges {str(path)!r}: name a .parquet, .csv, .tsv or "
                             ".duckdb file")


# --- the parser ----------------------------------------------------------------------------------
def _bounded(low: int, high: int | None = None):
    """An argparse type: a whole number in low..high (argparse names the flag)."""
    def parse(text: str) -> int:
        try:
            value = int(text)
        except ValueError:
            value = None
        if value is None or value < low or (high is not None and value > high):
            limit = f"from {low} to {high}" if high is not None else f"at least {low}"
            raise argparse.ArgumentTypeError(f"must be a whole number {limit}, got {text!r}")
        return value
    return parse


def program_name(argv0: str | None = None) -> str:
    """The command as the user ran it: ``grail-duckdb`` (the installed script) or
    ``python -m grail_duckdb``.

    >>> program_name("/usr/local/bin/grail-duckdb"), program_name("/x/grail_duckdb/__main__.py")
    ('grail-duckdb', 'python -m grail_duckdb')
    """
    name = Path(sys.argv[0] if argv0 is None else argv0).name
    return "grail-duckdb" if name.startswith("grail-duckdb") else "python -m grail_duckdb"


def parser(prog: str | None = None) -> argparse.ArgumentParser:
    """The argument parser of ``python -m grail_duckdb`` (``grail-duckdb``)."""
    top = argparse.ArgumentParser(prog=prog or program_name(),
                                  description="Exact reachability for DuckDB edge tables (GRAIL).")
    sub = top.add_subparsers(dest="command", required=True)
    labels, seed = _bounded(1, MAX_LABELS), _bounded(0)

    b = sub.add_parser("build", help="index an edge file; the index is written next to it")
    b.add_argument("edges", help="edge file (.parquet, .csv, .tsv, .txt, .gra, optionally .gz) "
                                 "or file.duckdb:table")
    b.add_argument("--src", help="source column (CSV/TSV with a header, Parquet, DuckDB)")
    b.add_argument("--dst", help="destination column")
    b.add_argument("--format", help="override the format detected from the file name")
    b.add_argument("--reverse", action="store_true", help="swap the columns (cited citing files)")
    _add_text_options(b, keys=True)
    b.add_argument("--labels", type=labels, default=None,
                   help=f"GRAIL label pairs, 1..{MAX_LABELS} (default: {DEFAULT_LABELS['cpu']} "
                        f"on the CPU, {DEFAULT_LABELS['gpu']} on a GPU)")
    b.add_argument("--seed", type=seed, default=0)
    b.add_argument("--backend", choices=["auto", "cpu", "gpu"], default=None)
    b.add_argument("--name", help="index name for file.duckdb:table (default: the table name)")
    b.add_argument("--out", help="index file (default: beside the input)")
    b.add_argument("--append", metavar="NEW",
                   help="absorb NEW's edges (new papers citing older ones or each other) into "
                        "the saved index of EDGES without a rebuild, written beside it as a "
                        "part; --src/--dst/--format/--reverse read NEW")
    b.set_defaults(func=cmd_build)

    q = sub.add_parser("query", help="answer a file of (src, dst) pairs with a saved index")
    q.add_argument("index", help="an index file written by build or grail_index")
    q.add_argument("pairs", help="pairs file (any edge file format)")
    q.add_argument("--src", help="source column of the pairs file")
    q.add_argument("--dst", help="destination column of the pairs file")
    q.add_argument("--format", help="override the pairs file's format")
    _add_text_options(q, keys=False)
    q.add_argument("--backend", choices=["auto", "cpu", "gpu"], default=None)
    q.add_argument("--out", help="answers file, .parquet or .csv (default: CSV on stdout)")
    q.set_defaults(func=cmd_query)

    d = sub.add_parser("demo", help="index a citation graph in DuckDB and run the examples")
    d.add_argument("--edges", help="a real edge file instead of the generated graph, e.g. "
                                   "../shared/datasets/snap/cit-HepTh.tsv.gz")
    d.add_argument("--reverse", action="store_true", help="the file lists cited citing")
    d.add_argument("--papers", type=_bounded(1), default=DEMO_PAPERS,
                   help=f"papers in the generated graph (default {DEMO_PAPERS:,})")
    d.add_argument("--seed", type=seed, default=0)
    d.add_argument("--scalar", action="store_true",
                   help="also run each query on the per-chunk path and compare the answers")
    d.add_argument("--cte-budget", type=float, default=DEMO_CTE_BUDGET,
                   help="seconds after which a recursive CTE is stopped "
                        f"(default {DEMO_CTE_BUDGET:g})")
    d.add_argument("--index", help="also persist the index to this Parquet file")
    d.add_argument("--write-edges", action="append", metavar="FILE",
                   help="also write the citations (citing, cited) to FILE: .parquet, .csv, "
                        ".tsv, or .duckdb (table cites, view papers); may be repeated")
    d.set_defaults(func=cmd_demo)

    return top


def _add_text_options(p, *, keys: bool) -> None:
    p.add_argument("--header", action=argparse.BooleanOptionalAction, default=None,
                   help="CSV/TSV: the first row holds column names, or not (default: a header "
                        "unless the first row is two integers, as DuckDB's sniffer decides)")
    if keys:
        p.add_argument("--string-keys", action="store_true",
                       help="CSV/TSV: index every key as text (by default keys are integers "
                            "when all are, and a column of integers with a few other cells is "
                            "refused with the line at fault)")


def for_command_line(message: str) -> str:
    """A library message with its Python keywords (``fmt=``, ``src=`` ...) named as flags.

    >>> for_command_line("pass src=... and dst=..., or fmt= one of gra, snap")
    'pass --src ... and --dst ..., or --format one of gra, snap'
    >>> for_command_line("or pass keys='str' to index every key as text")
    'or pass --string-keys to index every key as text'
    """
    def flag(m):
        if m.group(1):
            return _FLAGS[m.group(1)]
        return _FLAGS[m.group(2)] + " "
    return re.sub(r"(reverse=True|keys='str'|header=False)|\b(fmt|src|dst|labels)= ?", flag,
                  message)


def main(argv=None) -> int:
    """Entry point; returns the exit status (2 for input errors, with the message on stderr)."""
    args = parser().parse_args(argv)
    try:
        return int(args.func(args) or 0)
    except (GrailError, OSError, duckdb.Error) as exc:
        print(f"grail_duckdb {args.command}: {for_command_line(str(exc))}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print(f"grail_duckdb {args.command}: interrupted", file=sys.stderr)
        return 130
