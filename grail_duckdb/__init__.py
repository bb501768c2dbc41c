"""grail_duckdb: exact reachability ("is there a directed path from u to v?") for whole
columns of vertex pairs, with a GRAIL interval-label index built on the GPU or the CPU.

The package, in pipeline order: :mod:`.engine` (ingest -> ids -> CSR -> condensation -> labels
-> the index file; queries -> cuts -> search), :mod:`.indexfile` (the file: format, writer,
reader), :mod:`.model` (what the engine and the file share), :mod:`.kernels` (the hot loops
behind one interface, CPU and GPU), :mod:`.plugin` (the DuckDB surface) and :mod:`.tools` (edge-file readers, the seeded
generators, the demo's examples and the command line).

Python:
    >>> import grail_duckdb as gd
    >>> idx = gd.build_index([1, 2], [2, 3], backend="cpu")
    >>> idx.reaches([1, 3], [3, 1]).to_pylist()
    [True, False]
"""
from . import _numba_cache  # noqa: F401  (before any kernel: see the module)
from .engine.build import DEFAULT_LABELS, DEFAULT_SEED, build_index
from .engine.index import GrailIndex, load_index
from .engine.queries import QueryStats
from .engine.warm import warm_up
from .errors import (BackendError, EdgeInputError, GrailError, IndexFileError,
                     IndexNotSavedError, KeyTypeError, NotAppendableError, StaleIndexError)
from .plugin import explain, install, per_chunk, sql
from .tools.readers import read_edges

__version__ = "0.1.0"

__all__ = [
    "BackendError", "EdgeInputError", "GrailError", "IndexFileError", "IndexNotSavedError",
    "KeyTypeError", "NotAppendableError", "StaleIndexError", "DEFAULT_LABELS", "DEFAULT_SEED",
    "GrailIndex", "QueryStats", "build_index", "load_index", "install", "sql", "explain",
    "per_chunk", "read_edges", "warm_up",
]
