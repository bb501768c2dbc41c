"""The SQL files of the package: ``grail.sql`` (the macros ``install`` creates) and
``examples.sql`` (the analytic queries of the demo and the examples)."""
from __future__ import annotations

import re

from ..resources import sql_dir

__all__ = ["macro_names", "named_queries", "sql_text"]


def sql_text(name: str) -> str:
    """The text of one of the package's SQL files (``grail.sql``, ``examples.sql``)."""
    return (sql_dir() / name).read_text()


def macro_names() -> frozenset:
    """The names of the macros ``grail.sql`` creates.

    >>> {"reaches", "hops", "grail_index"} <= macro_names()
    True
    """
    return frozenset(re.findall(r"CREATE OR REPLACE TEMP MACRO (\w+)", sql_text("grail.sql")))


def named_queries(name: str = "examples.sql") -> dict[str, str]:
    """The queries of a SQL file split at ``-- name: x`` lines, in file order (each query keeps
    its comment lines)."""
    out: dict[str, str] = {}
    current = None
    for line in sql_text(name).splitlines():
        if line.startswith("-- name:"):
            current = line.split(":", 1)[1].strip()
            out[current] = ""
        elif current is not None:
            out[current] += line + "\n"
    return {k: v.strip() for k, v in out.items()}
