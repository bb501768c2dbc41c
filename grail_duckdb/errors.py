"""The exceptions grail_duckdb raises; each message says what went wrong and what to do."""


class GrailError(Exception):
    """Base class of every error grail_duckdb raises on purpose."""


class EdgeInputError(GrailError, ValueError):
    """The edge input cannot be indexed (missing column, NULL endpoint, unsupported type)."""


class KeyTypeError(GrailError, TypeError):
    """Query keys are not of the index's key type (e.g. VARCHAR keys against an integer index)."""


class IndexFileError(GrailError):
    """An index file is truncated, corrupt, foreign, or written by a newer format version."""


class IndexNotSavedError(GrailError, OSError):
    """A build finished but writing its index file failed (a full disk, a lost folder); the
    old file, if any, is as it was, and ``index`` holds the built index (save it elsewhere)."""

    def __init__(self, message: str, index):
        super().__init__(message)
        self.index = index


class StaleIndexError(GrailError):
    """The edge table changed since the index was built."""


class NotAppendableError(GrailError, ValueError):
    """A batch of edges that an index cannot absorb without a rebuild (an edge out of a vertex
    it already holds that adds a path, or more appended levels than an index keeps): rebuild
    the index from the grown edge list."""


class BackendError(GrailError):
    """The requested backend cannot run here (no GPU, out of device memory)."""
