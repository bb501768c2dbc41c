"""Reachability for a Dask DataFrame of pairs, answered partition by partition on the workers
(the optional extra ``grail_duckdb[dask]``).

:func:`reaches` adds a ``reaches`` column with ``map_partitions``, lazily like any Dask
operation. Each worker process loads the index from its Parquet file the first time one of
its tasks needs it and keeps it (:func:`worker_index`): one load per worker, however many
partitions it answers. The backend is chosen on the worker: on a worker that sees a GPU (for
example one of dask-cuda's ``LocalCUDACluster``, one worker per GPU, each seeing its own as
device 0) the index lives on that GPU, elsewhere on the CPU.

    import dask.dataframe as dd
    from dask.distributed import Client, LocalCluster
    import grail_duckdb.dask as gdd

    client = Client(LocalCluster(n_workers=4))          # or dask_cuda.LocalCUDACluster()
    pairs = dd.read_parquet("pairs/")                    # columns citing, cited
    out = gdd.reaches(pairs, "cites.grail.parquet", src="citing", dst="cited")
    out.to_parquet("answers/")                           # nothing runs before this line

The index file must be readable at the same path by every worker (a shared file system, or
the same machine). Answers are a nullable boolean column (NULL where a key is NULL).
"""
from __future__ import annotations

import os
import threading
from pathlib import Path

import pyarrow as pa

__all__ = ["loaded_indices", "reaches", "worker_index"]

#: the indices this process (a Dask worker) has loaded: (file identity, backend) -> index
_LOADED: dict = {}
_LOCK = threading.Lock()


def reaches(df, index_path, *, src: str = "src", dst: str = "dst", column: str = "reaches",
            backend: str | None = None):
    """Answer a Dask DataFrame of pairs against an index file, partition by partition.

    Parameters
    ----------
    df : dask.dataframe.DataFrame
        Holds the key columns ``src`` and ``dst``.
    index_path : str or Path
        An index file (``build_index(...).save(path)``, the command line's ``build``, SQL's
        ``grail_index`` on a file database); each worker loads it once and keeps it (on its
        GPU under dask-cuda's ``LocalCUDACluster``), and again when the file changes.
    src, dst : str
        The key columns.
    column : str
        The name of the answers' column.
    backend : {'cpu', 'gpu'}, optional
        Default: each worker's own (its GPU when it has one).

    Returns
    -------
    dask.dataframe.DataFrame
        ``df`` with a nullable boolean column ``column``, lazily (nothing runs until it is
        computed or written).

    Raises
    ------
    ValueError
        ``df`` lacks ``src`` or ``dst`` (the message lists its columns).

    Examples
    --------
    >>> import dask.dataframe as dd, pandas as pd, tempfile, pathlib, grail_duckdb as gd
    >>> import grail_duckdb.dask as gdd
    >>> path = pathlib.Path(tempfile.mkdtemp()) / "g.grail.parquet"
    >>> _ = gd.build_index([1, 2], [2, 3], backend="cpu").save(path)
    >>> pairs = dd.from_pandas(pd.DataFrame({"src": [1, 3], "dst": [3, 1]}), npartitions=1)
    >>> gdd.reaches(pairs, path, backend="cpu").compute()["reaches"].tolist()
    [True, False]
    """
    import pandas as pd

    missing = [c for c in (src, dst) if c not in df.columns]
    if missing:
        raise ValueError(f"the DataFrame has no column {', '.join(map(repr, missing))}; its "
                         f"columns are {list(df.columns)}; pass src=... and dst=...")
    path = str(Path(index_path).resolve())
    meta = df._meta.assign(**{column: pd.Series([], dtype="boolean")})
    return df.map_partitions(_answer_partition, path, src, dst, column, backend, meta=meta)


def worker_index(path: str, backend: str | None = None):
    """The index at ``path`` in this process, loaded on first use and kept (reloaded when the
    file changes)."""
    from .engine.index import load_index
    from .kernels import resolve

    st = os.stat(path)
    key = (path, st.st_mtime_ns, st.st_size, resolve(backend))
    with _LOCK:
        index = _LOADED.get(key)
        if index is None:
            for old in [k for k in _LOADED if k[0] == path]:
                del _LOADED[old]  # the file was replaced: drop its old copy
            index = _LOADED[key] = load_index(path, backend=key[3])
        return index


def loaded_indices() -> list[tuple]:
    """``(path, backend)`` of every index this process holds (run it on the workers with
    ``client.run(grail_duckdb.dask.loaded_indices)``)."""
    with _LOCK:
        return [(k[0], k[3]) for k in _LOADED]


def _answer_partition(part, path: str, src: str, dst: str, column: str, backend):
    """One partition (a pandas DataFrame) with its answers added."""
    import pandas as pd

    index = worker_index(path, backend)
    answers = index.reaches(pa.array(part[src], from_pandas=True),
                            pa.array(part[dst], from_pandas=True))
    out = part.copy(deep=False)
    out[column] = pd.array(answers.to_pandas(types_mapper={pa.bool_(): pd.BooleanDtype()}.get),
                           dtype="boolean")
    return out
