"""The exceptions grail_duckdb raises; each message says what went wrong and what to do."""


class GrailError(Exception):
    """Base class of every error grail_duckdb raises on purpose."""


class EdgeInputError(GrailError, ValueError):
    """The edge input cannot be indexed (missing column, NULL endpoint, unsupported type)."""


class KeyTypeError(GrailError, TypeError):
    """Query keys are not of the index's key type (e.g. VARCHAR keys against an integer index)."""


class IndexFileError(GrailError):
    """An index file is truncated, corrupt, foreign, or written by a newer format version."""


class StaleIndexError(GrailError):
    """The edge table changed since the index was built."""


class BackendError(GrailError):
    """The requested backend cannot run here (no GPU, out of device memory)."""


class DatasetError(GrailError, LookupError):
    """A named dataset is unknown, or its file is not in the datasets folder."""
