"""The project's errors as they reach SQL callers.

DuckDB reports an exception raised inside a Python function as ``duckdb.InvalidInputException``
with the text ``Python exception occurred while executing the UDF: StaleIndexError: ...``, so
``except grail_duckdb.StaleIndexError`` would never catch it. On connections grail_duckdb is
installed on, statements run through ``execute`` / ``sql`` re-raise such errors as an exception
that is both: a ``duckdb.InvalidInputException`` (what DuckDB code already catches) and the
project's class (``except gd.StaleIndexError``), with a message that starts with the error's
name and says what to do. :func:`grail_error` finds the project's error in any DuckDB error
(e.g. one raised later, while a lazy relation is fetched).

>>> import duckdb
>>> from grail_duckdb.errors import StaleIndexError
>>> err = as_sql_error(StaleIndexError("the index 'x' is stale; rebuild it"))
>>> isinstance(err, duckdb.InvalidInputException), isinstance(err, StaleIndexError), str(err)
(True, True, "StaleIndexError: the index 'x' is stale; rebuild it")
"""
from __future__ import annotations

import functools

import duckdb

from .. import errors
from .duckdb_api import UDF_ERROR

__all__ = ["as_sql_error", "grail_error"]

_CLASSES = {c.__name__: c for c in (errors.GrailError, errors.EdgeInputError,
                                     errors.KeyTypeError, errors.IndexFileError,
                                     errors.StaleIndexError, errors.BackendError)}


@functools.lru_cache(maxsize=None)
def _sql_class(cls: type) -> type:
    """``cls`` combined with ``duckdb.InvalidInputException`` (one class per error class)."""
    return type(cls.__name__, (duckdb.InvalidInputException, cls), {"__module__": cls.__module__})


def as_sql_error(exc: errors.GrailError) -> Exception:
    """``exc`` as the exception a SQL caller gets: both DuckDB's and the project's class."""
    name = type(exc).__name__
    text = str(exc)
    out = _sql_class(type(exc))(text if text.startswith(name + ":") else f"{name}: {text}")
    out.__cause__ = exc.__cause__
    return out


def grail_error(exc: BaseException) -> Exception | None:
    """The project's error inside a DuckDB error (as both classes), or None.

    >>> import duckdb
    >>> e = duckdb.InvalidInputException("Invalid Input Error: Python exception occurred while "
    ...                                   "executing the UDF: KeyTypeError: cast the keys")
    >>> from grail_duckdb.errors import KeyTypeError
    >>> isinstance(grail_error(e), KeyTypeError), str(grail_error(e))
    (True, 'KeyTypeError: cast the keys')
    """
    if isinstance(exc, errors.GrailError):
        return exc if isinstance(exc, duckdb.Error) else as_sql_error(exc)
    if not isinstance(exc, duckdb.Error):
        return None
    found = UDF_ERROR.search(str(exc))
    if not found or found.group(1) not in _CLASSES:
        return None
    return as_sql_error(_CLASSES[found.group(1)](found.group(2)))
