"""grail_duckdb: exact reachability ("is there a directed path from u to v?") for whole
columns of vertex pairs, with a GRAIL interval-label index built on the GPU or the CPU.

Python:
    >>> import grail_duckdb as gd
    >>> idx = gd.build_index([1, 2], [2, 3], backend="cpu")
    >>> idx.reaches([1, 3], [3, 1]).to_pylist()
    [True, False]
"""
from .errors import (BackendError, DatasetError, EdgeInputError, GrailError, IndexFileError,
                     KeyTypeError, StaleIndexError)
from .index import DEFAULT_LABELS, DEFAULT_SEED, GrailIndex, build_index
from .queries import QueryStats
from .plugin import install
from .sqlrewrite import sql
from .readers import read_edges
from .datasets import load_dataset

__version__ = "0.1.0"


def load_index(path, **kw) -> GrailIndex:
    """Load a saved index (see :func:`grail_duckdb.persistence.load`)."""
    from .persistence import load

    return load(path, **kw)


__all__ = [
    "BackendError", "EdgeInputError", "GrailError", "IndexFileError", "KeyTypeError",
    "StaleIndexError", "DatasetError", "DEFAULT_LABELS", "DEFAULT_SEED", "GrailIndex",
    "QueryStats", "build_index", "load_index", "install", "sql", "read_edges", "load_dataset",
]
