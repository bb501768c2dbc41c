"""``python -m grail_duckdb``: see :mod:`grail_duckdb.cli`."""
from .cli import main

raise SystemExit(main())
