"""Living edge tables: what a write changed, found without scanning the table when it only
appended rows, and the appended rows absorbed by the index (:mod:`grail_duckdb.engine.append`).

Every index of the registry keeps a :class:`Tracker`: the row id ``end`` below which every row
of the table that will ever be visible was visible to the index's snapshot (and is indexed),
and, for a table in a database file, where that database's write-ahead log stood and how many
checkpoints its file had seen. After a write anywhere in the database, :func:`changes` finds
what changed in the edge table, in one transaction of its own:

* **the cheap proof** (file databases): the table's object id and definition unchanged; the
  file's checkpoint count unchanged (a checkpoint merges updates and may renumber rows: then
  the WAL no longer holds them); the log's new entries hold no UPDATE or DELETE of the table
  (nor an ALTER or CHECKPOINT of anything); then the rows with ``rowid >= end`` are exactly
  the rows committed since, and nothing else changed. Its cost: the log's new bytes and the
  new rows (DuckDB skips the row groups below ``end``): it grows with the rows appended, not
  with the table.
* **the scan** otherwise (an in-memory database, a checkpoint since, an UPDATE or DELETE
  anywhere in the log): one pass of ``count(*)`` and ``sum(hash(src, dst))`` over the rows
  below ``end`` and over those from ``end`` on: the rows below unchanged (the content check
  of :mod:`.staleness`) make the rows from ``end`` on an append; else the index is stale,
  and the error says whether rows were deleted, updated or renumbered.

Why the proof is exact on DuckDB 2.0.1 (each fact is checked by ``tests/test_sql_append.py``):

1. a commit appends its rows at the end of the table and numbers them then (rows of an older
   transaction that commits later get higher row ids), so every row committed after a
   snapshot has a row id above every row that snapshot sees;
2. a commit writes its log entries before it becomes visible to transactions that start
   later, except a commit that checkpoints instead of logging (DuckDB's
   ``auto_checkpoint_skip_wal_threshold``): its change then reaches the file through the
   checkpoint, which counts in the file's header (checked here as DuckDB's own header
   iteration);
3. the check's transaction first runs an UPDATE of no row of the table: it holds DuckDB's
   shared checkpoint lock until the check rolls back, so no checkpoint runs meanwhile and one
   that was running has finished (its count visible) before the check reads anything;
4. an UPDATE, a DELETE (TRUNCATE included) of the table is logged as ``UPDATE_TUPLE`` /
   ``DELETE_TUPLE`` after a ``USE_TABLE`` naming it; an INSERT as ``INSERT_TUPLE`` or
   ``ROW_GROUP_DATA``; a replaced or altered table changes its object id or its definition.

The file's header and the log are read by :mod:`.duckdb_api` (DuckDB's own formats); a byte
it does not read as it expects sends the check to the scan.
"""
from __future__ import annotations

import contextlib
import threading
import weakref
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path

import duckdb
import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from ..engine.append import COMPACT_SHARE, parts_share
from ..errors import GrailError, NotAppendableError
from . import hooks
from .duckdb_api import checkpoint_iteration, read_log
from .names import sql_string

__all__ = ["COMPACT_SHARE", "Change", "Tracker", "absorb", "baseline", "changes",
           "current_source", "log_mark", "snapshot", "tracker_of", "verify", "wait_for_parts"]

@dataclass
class Tracker:
    """What an index's snapshot of its edge table was: ``end``, the row id below which every
    row that will ever be visible was visible to it; for a file database, its log (``wal``),
    the log's bytes read then (``pos``, an entry boundary) and the file's checkpoint count
    (``iteration``). ``wal`` None: no cheap proof (the scan decides)."""

    end: int
    table: tuple[str, str]  # (schema, name): the log names tables so
    wal: Path | None = None
    db_file: Path | None = None
    pos: int = 0
    iteration: int | None = None
    sig: tuple | None = None  # the table's (object id, definition)


@dataclass
class Change:
    """What :func:`changes` found: ``kind`` 'none', 'append' (``rows``: the new rows as Arrow,
    columns src and dst; ``check``: the table's check after them; ``tracker``: the new
    snapshot) or 'stale' (``reason`` says which change); ``proof``: 'log' or 'scan'."""

    kind: str
    rows: pa.Table | None = None
    check: dict | None = None
    tracker: Tracker | None = None
    reason: str = ""
    proof: str = "scan"


def log_mark(cur, where, since: Tracker | None = None) -> tuple:
    """``(wal, db_file, pos, iteration)`` of the database of ``where`` (a file database), to
    read *before* a snapshot is taken: where the log's last committed transaction ends
    (every commit after that lies after it; every one before is in a snapshot begun later)
    and the file's checkpoint count; ``since``: a tracker whose position the log is read
    from (else from its start). ``(None, None, 0, None)`` for an in-memory database or a
    file or log this module does not read."""
    none = (None, None, 0, None)
    if where is None or where[3] != "table":
        return none
    db_file = since.db_file if since is not None and since.db_file else _database_file(cur, where)
    if db_file is None:
        return none
    iteration = checkpoint_iteration(db_file)
    if iteration is None:
        return none
    wal = db_file.with_name(db_file.name + ".wal")
    start = since.pos if since is not None and since.iteration == iteration else 0
    what, pos = read_log(wal, start, (where[1], where[2]))
    if what in ("log unreadable", "log not understood", "log replaced"):
        return none
    return wal, db_file, pos, iteration


def _database_file(cur, where) -> Path | None:
    row = cur.execute("SELECT path FROM duckdb_databases() WHERE database_name = "
                      f"{sql_string(where[0])}").fetchall()
    return Path(row[0][0]).resolve() if row and row[0][0] else None


# --- the snapshot of a build or a load, and the checks after a write ------------------------
def baseline(cur, where, qtable: str, mark) -> Tracker | None:
    """The tracker of an index whose snapshot is the transaction open on ``cur`` (the build's
    or the load's: its read and its content check ran in it). ``mark``: :func:`log_mark`,
    read before that transaction began. None for a view (no row ids)."""
    if where is None or where[3] != "table":
        return None
    end = cur.execute(f"SELECT coalesce(max(rowid) + 1, 0) FROM {qtable}").fetchall()[0][0]
    return Tracker(int(end), (where[1], where[2]), *mark, sig=_signature(cur, where))


def _signature(cur, where) -> tuple | None:
    """The table's (object id, definition), or None when it is gone."""
    row = cur.execute(
        "SELECT table_oid, sql FROM duckdb_tables() WHERE database_name = "
        f"{sql_string(where[0])} AND schema_name = {sql_string(where[1])} AND table_name = "
        f"{sql_string(where[2])}").fetchall()
    return tuple(row[0]) if row else None


@contextlib.contextmanager
def _checking(cur, qtable: str, qsrc: str):
    """A transaction on ``cur`` for a check; yields whether it holds DuckDB's shared
    checkpoint lock (an UPDATE of no row, rolled back: no checkpoint runs while it is held,
    and one under way ends first). Rolled back on exit."""
    cur.execute("BEGIN TRANSACTION")
    try:
        try:
            cur.execute(f"UPDATE {qtable} SET {qsrc} = {qsrc} WHERE rowid < 0")
            guarded = True
        except duckdb.Error:  # a read-only database, a view: no guard (and no cheap proof)
            cur.execute("ROLLBACK")
            cur.execute("BEGIN TRANSACTION")
            guarded = False
        yield guarded
    finally:
        with contextlib.suppress(duckdb.Error):
            cur.execute("ROLLBACK")


#: catalog versions one check adds itself (BEGIN, the guard's UPDATE, ROLLBACK)
CHECK_VERSIONS = 3


def changes(cur, entry, tracker: Tracker) -> Change:
    """What changed in ``entry``'s edge table since ``tracker``'s snapshot (see the module):
    the cheap proof first; where it does not hold, the scan in a transaction of its own,
    the log's mark read before it (the next check's starting point)."""
    if tracker.wal is not None and tracker.iteration is not None:
        with _checking(cur, entry.table, entry.src) as guarded:
            found = _table_replaced(cur, entry, tracker)
            if found is not None:
                return found
            if guarded and checkpoint_iteration(tracker.db_file) == tracker.iteration:
                what, end = read_log(tracker.wal, tracker.pos, tracker.table)
                if what == "appends":
                    nxt = Tracker(tracker.end, tracker.table, tracker.wal, tracker.db_file, end,
                                  tracker.iteration, tracker.sig)
                    return _appended(cur, entry, tracker, nxt)
    mark = log_mark(cur, entry.where, tracker)
    with _checking(cur, entry.table, entry.src):
        found = _table_replaced(cur, entry, tracker)
        if found is not None:
            return found
        return _scanned(cur, entry, tracker, Tracker(tracker.end, tracker.table, *mark,
                                                     sig=tracker.sig))


def _table_replaced(cur, entry, tracker: Tracker) -> Change | None:
    """A stale change when the table is gone or is another one (its object id or
    definition changed), else None."""
    sig = _signature(cur, entry.where)
    if sig is None:
        return Change("stale", reason="the table was dropped or renamed")
    if tracker.sig is not None and sig != tracker.sig:
        return Change("stale", reason="the table was replaced or altered (CREATE OR REPLACE, "
                                      "ALTER)")
    if tracker.sig is None:
        tracker.sig = sig
    return None


def _appended(cur, entry, tracker: Tracker, nxt: Tracker) -> Change:
    """The rows from the tracker's end on, proven to be the only change (the cheap proof)."""
    qt, qs, qd = entry.table, entry.src, entry.dst
    rows = cur.sql(f"SELECT {qs} AS src, {qd} AS dst, rowid AS r, hash({qs}, {qd}) AS h "
                   f"FROM {qt} WHERE rowid >= {tracker.end}").to_arrow_table()
    if rows.num_rows == 0:
        return Change("none", tracker=nxt, proof="log")
    nxt.end = int(pc.max(rows.column("r")).as_py()) + 1
    check = {**entry.check, "rows": int(entry.check["rows"]) + rows.num_rows,
             "hash": str(int(entry.check["hash"]) + exact_sum(rows.column("h")))}
    return Change("append", rows.select(["src", "dst"]), check, nxt, proof="log")


def exact_sum(values: pa.ChunkedArray) -> int:
    """The sum of UBIGINT values as a Python integer, as DuckDB's ``sum`` (a HUGEINT) gives
    it: their high and low 32-bit halves summed apart (no sum of fewer than 2**32 halves
    overflows 64 bits), so that one query reads the new rows and their hashes.

    >>> exact_sum(pa.chunked_array([pa.array([2**64 - 1, 2**64 - 1, 5], pa.uint64())]))
    36893488147419103235
    """
    total = 0
    for chunk in values.chunks:
        v = chunk.to_numpy(zero_copy_only=False).astype(np.uint64, copy=False)
        total += (int((v >> np.uint64(32)).sum(dtype=np.uint64)) << 32) + int(
            (v & np.uint64(0xFFFFFFFF)).sum(dtype=np.uint64))
    return total


def _scanned(cur, entry, tracker: Tracker, nxt: Tracker) -> Change:
    """The scan: the rows below the tracker's end against the index's check, the rows from
    it on as an append (``nxt``: the next tracker, its log mark read before the snapshot)."""
    qt, qs, qd = entry.table, entry.src, entry.dst
    parts = cur.execute(
        f"SELECT rowid >= {tracker.end} AS new, count(*), coalesce(sum(hash({qs}, {qd})), 0)"
        f"::VARCHAR, max(rowid) FROM {qt} GROUP BY ALL").fetchall()
    got = {bool(new): (int(n), str(h), int(mx)) for new, n, h, mx in parts}
    old = got.get(False, (0, "0", -1))
    rows0, hash0 = int(entry.check["rows"]), str(entry.check["hash"])
    if old[:2] != (rows0, hash0):
        reason = ("rows were deleted (DELETE)" if old[0] < rows0 else
                  "rows were updated (UPDATE)" if old[0] == rows0 else
                  "rows were renumbered (a DELETE, then a checkpoint)")
        return Change("stale", reason=reason)
    if True not in got:
        return Change("none", tracker=nxt)
    n, h, mx = got[True]
    rows = cur.sql(f"SELECT {qs} AS src, {qd} AS dst FROM {qt} "
                   f"WHERE rowid >= {tracker.end}").to_arrow_table()
    nxt.end = mx + 1
    check = {**entry.check, "rows": rows0 + n, "hash": str(int(hash0) + int(h))}
    return Change("append", rows, check, nxt)


# --- the registry's side: a build's snapshot, the check after a write, absorbing ------------
@contextlib.contextmanager
def snapshot(cur, where):
    """The transaction of a build or a load on ``cur``: its read of the table, its content
    check and its :class:`Tracker` (:func:`baseline`) in one snapshot; yields the log's mark,
    read before it began."""
    mark = log_mark(cur, where)
    cur.execute("BEGIN TRANSACTION")
    try:
        yield mark
    finally:
        with contextlib.suppress(duckdb.Error):
            cur.execute("COMMIT")


def current_source(path) -> dict:
    """What an index file and its parts record about the edge table, the last part's check
    (rows, hash, the row id end) over the file's (:func:`~.files.read_source`)."""
    from ..indexfile import read_metadata
    from ..indexfile.appends import read_parts
    from . import files

    side = files.read_source(path)
    for part, _ in read_parts(path, read_metadata(path).fingerprint):
        side.update({k: v for k, v in part.source.items() if k in _CARRIED})
    return side


#: what a part's record of the table replaces in the file's
_CARRIED = ("rows", "hash", "duckdb", "rowid_end", "auto_rebuild")


def tracker_of(side: dict, where) -> Tracker | None:
    """The tracker an index file (and its parts) recorded: its row id end; no log position
    (the first check after a load scans) and no signature."""
    if "rowid_end" not in side or where is None or where[3] != "table":
        return None
    return Tracker(int(side["rowid_end"]), (where[1], where[2]))


def verify(reg, entry, version: int) -> None:
    """The freshness check of ``entry`` after a write (:meth:`.Registry.fresh`): absorbs an
    append, or marks the entry stale with the kind of change; records the catalog version it
    verified (its own statements' versions included when nothing else wrote meanwhile)."""
    cur = reg.cursor(quiet=False)
    try:
        before = reg.catalog_version()
        change = changes(cur, entry, entry.tracker)
        after = reg.catalog_version()
    except (duckdb.Error, GrailError):
        change, after, before = Change("stale", reason="the table became unreadable"), 0, 1
    finally:
        cur.close()
    if change.kind == "append":
        try:
            absorb(reg, entry, change)
        except NotAppendableError as exc:
            change = Change("stale", reason=refused(exc))
    if change.kind == "stale":
        entry.stale = stale_message(entry, change.reason)
        return
    if change.kind == "none":
        entry.tracker = change.tracker
    entry.verified = after if after - before == CHECK_VERSIONS else version


def absorb(reg, entry, change: Change) -> None:
    """Append ``change``'s rows to ``entry``'s index, have the batch written as a part beside
    its file (with the table's check after it; on the entry's writer thread) and start a
    compaction when the parts have grown past :data:`COMPACT_SHARE` of the file."""
    grown = entry.index.append(change.rows)
    entry.tracker = change.tracker
    entry.check = change.check
    entry.index = grown
    if entry.path is not None and grown.base_path is not None and grown.appended:
        _write_later(entry, grown, persisted_source(entry))
    entry.action = "appended"
    batches = grown.appended
    entry.note = (f"{len(batches)} appended batches since the index file: "
                  f"+{sum(b.vertices for b in batches):,} vertices, "
                  f"+{sum(b.rows for b in batches):,} edges (no rebuild)")
    entry.cache.clear()
    maybe_compact(reg, entry)


#: the longest a part's write waits for the statements that ran when it was absorbed
PART_HOLD_SECONDS = 1.0


class _Parts:
    """The part writer of one index: a thread that writes its batches in order, after the
    statement that absorbed them has its answer (a process that ends first loses none of
    them: its next load finds the rows past the last written part's row id end and absorbs
    them again). Each write first waits for the statements that ran when its batch was
    absorbed (:func:`.hooks.wait_for_statements`; at most :data:`PART_HOLD_SECONDS`): on a
    machine of few cores, a write beside the statement slows both."""

    def __init__(self):
        self.pool = ThreadPoolExecutor(1, thread_name_prefix="grail-duckdb-parts")
        self.written = 0  # batches of the entry's chain on disk
        self.pending = []
        self.hurry = 0  # waits for the writes under way (:meth:`wait`): no holding back
        self.lock = threading.Lock()

    def submit(self, entry, index, source) -> None:
        running = hooks.statements_in_flight()

        def run():
            hooks.wait_for_statements(running, PART_HOLD_SECONDS, lambda: self.hurry > 0)
            index.persisted = max(index.persisted, self.written)
            try:
                index.save_parts(source=source)
            except OSError as exc:
                entry.note += f"; batches kept in memory only, not written ({exc})"
                return
            self.written = len(index.appended)

        self.pending = [f for f in self.pending if not f.done()] + [self.pool.submit(run)]

    def wait(self) -> None:
        with self.lock:
            self.hurry += 1
        try:
            hooks.nudge()
            for f in list(self.pending):
                f.result()
        finally:
            with self.lock:
                self.hurry -= 1


_WRITERS: "weakref.WeakKeyDictionary" = weakref.WeakKeyDictionary()
_WRITERS_LOCK = threading.Lock()


def _write_later(entry, index, source) -> None:
    """Write ``index``'s batches not on disk yet as parts, on ``entry``'s writer thread."""
    with _WRITERS_LOCK:
        parts = _WRITERS.get(entry)
        if parts is None:
            parts = _WRITERS[entry] = _Parts()
            parts.written = index.persisted
    parts.submit(entry, index, source)


def wait_for_parts(entry=None) -> None:
    """Wait until the batches absorbed so far (of ``entry``, or of every index) are written."""
    with _WRITERS_LOCK:
        writers = [_WRITERS[entry]] if entry is not None and entry in _WRITERS else (
            [] if entry is not None else list(_WRITERS.values()))
    for parts in writers:
        parts.wait()


def persisted_source(entry) -> dict:
    """What a part records about the table after it: the check, the row id end, the
    auto_rebuild setting."""
    doc = {**entry.check, "auto_rebuild": str(bool(entry.auto_rebuild))}
    if entry.tracker is not None:
        doc["rowid_end"] = str(entry.tracker.end)
    return doc


def maybe_compact(reg, entry) -> None:
    """Fold ``entry``'s parts into a rebuilt index file once they pass
    :data:`COMPACT_SHARE`: a rebuild on a thread of its own (queries go on with the appended
    index meanwhile; the rebuilt one replaces it when it is ready)."""
    if (parts_share(entry.index) <= COMPACT_SHARE or entry.cache.get("compacting")
            or entry.path is None):
        return
    entry.note += "; folding them into a rebuild in the background"

    def run():
        try:
            wait_for_parts(entry)
            reg.replace(entry, progress=False)
        except Exception:  # the appended index stays; the next append tries again
            entry.cache.pop("compacting", None)

    worker = entry.cache["compacting"] = threading.Thread(target=run, daemon=True,
                                                          name="grail-duckdb-compact")
    worker.start()


def wait_for_background(reg) -> None:
    """Wait until the background work of ``reg``'s indices (parts being written, a rebuild
    that folds them in) is done: it reads the database through a cursor, and a connection
    whose cursor is busy cannot close."""
    for entry in list(reg.entries.values()):
        wait_for_parts(entry)
        worker = entry.cache.get("compacting")
        if isinstance(worker, threading.Thread) and worker is not threading.current_thread():
            worker.join()


def refused(exc: NotAppendableError) -> str:
    """The stale reason of a batch the index cannot absorb."""
    return f"an INSERT added rows it cannot absorb: {exc}"


def record_settings(entry) -> None:
    """Write ``entry``'s settings (``auto_rebuild``) beside its file as a part of no rows, so
    that a later process reads them back (:func:`current_source`)."""
    index = entry.index
    if entry.path is None or index.base_path is None:
        return
    from ..engine.append import apply_batch
    from ..model import CSR, AppendBatch, Labels

    lab = index.labels
    d, hw = lab.d, int(lab.hub_down.shape[1])
    ww = 0 if lab.win_down is None else int(lab.win_down.shape[1])
    xp = index.kernels.xp
    empty = Labels(level=xp.empty(0, xp.int32), inner=xp.empty((0, d), xp.int32),
                   outer=xp.empty((0, d), xp.int32), tree=xp.empty((0, 4), xp.int32),
                   hub_down=xp.empty((0, hw), xp.uint64), hub_up=xp.empty((0, hw), xp.uint64),
                   **({} if not ww else dict(win_down=xp.empty((0, ww), xp.uint64),
                                             win_up=xp.empty((0, ww), xp.uint64))))
    keys = index.ids.keys[:0]
    batch = AppendBatch(keys, xp.empty(0, xp.int32), CSR(xp.zeros(1, xp.int64),
                                                          xp.empty(0, xp.int32)),
                        empty, 0, index.fingerprint, index.fingerprint)
    grown = apply_batch(index, batch)
    entry.index = grown
    _write_later(entry, grown, persisted_source(entry))
    wait_for_parts(entry)


def stale_message(entry, reason: str) -> str:
    """The StaleIndexError message of ``entry`` that names the change found."""
    from .names import readable

    return (f"the reachability index {entry.name!r} is stale: since it was built, {reason} "
            f"(edge table {readable(entry.table)}); rebuild it with {entry.rebuild_sql()} (or "
            "build it with auto_rebuild := true to rebuild on change)")
