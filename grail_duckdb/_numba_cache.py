"""The package's kernels in Numba's on-disk cache are stamped with a hash of every kernel
source of the package, not only of their own file.

Numba keys a cached kernel on its own file's time stamp and size. The kernels inline helpers
from other files (``inline="always"``), so a change to a helper alone would leave every kernel
that inlines it compiled from the old helper, giving other answers. Here each of Numba's cache
locators gets a twin for the package's files whose source stamp also holds
:func:`sources_hash`: any change to any kernel source makes every cached kernel of the package
stale, so it is compiled again. Imported by the package before any kernel is defined; the
caches stay where Numba puts them (beside the sources, or ``NUMBA_CACHE_DIR``).
"""
from __future__ import annotations

import hashlib
from pathlib import Path

from numba.core import caching

_PACKAGE = Path(__file__).resolve().parent


#: what a source file that Numba compiles into the package's kernels holds
_KERNEL_MARKS = (b"njit", b"@intrinsic", b"@overload")


def sources_hash(root: Path = _PACKAGE) -> str:
    """A short hash of every ``.py`` file under ``root`` that defines Numba kernels or code
    that Numba inlines into them (``@intrinsic``, ``@overload``).

    >>> len(sources_hash())
    16
    """
    h = hashlib.blake2b(digest_size=8)
    for path in sorted(root.rglob("*.py")):
        text = path.read_bytes()
        if any(mark in text for mark in _KERNEL_MARKS):
            h.update(str(path.relative_to(root)).encode() + b"\0" + text)
    return h.hexdigest()


_SOURCES = sources_hash()


def _ours(py_file: str) -> bool:
    try:
        return Path(py_file).resolve().is_relative_to(_PACKAGE)
    except OSError:
        return False


def _with_sources(base: type) -> type:
    """``base``, a Numba cache locator, for the package's files only, its source stamp joined
    by the hash of every kernel source."""

    class Locator(base):
        def get_source_stamp(self):
            return (super().get_source_stamp(), _SOURCES)

        @classmethod
        def from_function(cls, py_func, py_file):
            return super().from_function(py_func, py_file) if _ours(py_file) else None

    Locator.__name__ = Locator.__qualname__ = f"Grail{base.__name__}"
    return Locator


LOCATORS = tuple(_with_sources(b) for b in (caching.UserProvidedCacheLocator,
                                            caching.InTreeCacheLocator,
                                            caching.UserWideCacheLocator))
if not any(c.__name__.startswith("Grail") for c in caching.CacheImpl._locator_classes):
    caching.CacheImpl._locator_classes[:0] = list(LOCATORS)
