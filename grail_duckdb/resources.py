"""Where the package's non-Python files are: the SQL the plugin installs and the CUDA sources.

In a checkout (and an editable install) they are the repository's top-level ``sql/`` and
``kernels/`` folders; a wheel carries copies as ``grail_duckdb/_sql`` and ``grail_duckdb/_cuda``
(pyproject's force-include). The checkout wins, so an edited file is the one that runs.
"""
from __future__ import annotations

from pathlib import Path

from .errors import GrailError

_PACKAGE = Path(__file__).resolve().parent


def data_dir(repo_folder: str, installed_folder: str, marker: str) -> Path:
    """The folder holding ``marker``: ``<repo>/<repo_folder>``, else the installed copy.

    >>> data_dir("sql", "_sql", "grail.sql").name in ("sql", "_sql")
    True
    """
    for cand in (_PACKAGE.parent / repo_folder, _PACKAGE / installed_folder):
        if (cand / marker).is_file():
            return cand
    raise GrailError(f"the {repo_folder} files of grail_duckdb are missing (looked for {marker} "
                     f"in {_PACKAGE.parent / repo_folder} and {_PACKAGE / installed_folder}); "
                     "reinstall the package")


def sql_dir() -> Path:
    """The folder of the SQL files (``grail.sql``, ``examples.sql``)."""
    return data_dir("sql", "_sql", "grail.sql")


def cuda_dir() -> Path:
    """The folder of the CUDA sources (``kernels/*.cu``)."""
    return data_dir("kernels", "_cuda", "common.cuh")
