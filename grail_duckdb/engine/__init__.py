"""The engine: the pipeline that builds the index and the query path that answers from it.

One module per stage, in pipeline order:

* :mod:`.ingest`: edge input (Arrow table or stream, DuckDB relation, Parquet file or folder,
  arrays) -> checked key columns, read piece by piece
* :mod:`.transfer`: the read phase: keys packed as 32-bit offsets into the build's one array
  of edges, on the device, through pinned buffers (decoding, packing, copies overlapped)
* :mod:`.ids`: keys -> dense vertex ids 0..n-1 and back
* :mod:`.csr`: ids -> compressed sparse rows, forward and reverse
* :mod:`.condensation`: strongly connected components -> the condensed DAG (Multistep)
* :mod:`.labels`: GRAIL labels (four breadth-first passes), levels, tree intervals, hub sets
* :mod:`.queries`: query columns -> ids -> components -> cuts -> label-pruned search
* :mod:`.index`: :class:`~.index.GrailIndex` and :func:`~.index.build_index`, the pipeline end
  to end
* :mod:`.replicas`: one replica of an index per GPU, each call split across them
* :mod:`.warm`: every kernel compiled or loaded ahead of timed work

The index file is :mod:`grail_duckdb.indexfile`; what the engine and the file share is
:mod:`grail_duckdb.model`.
"""
