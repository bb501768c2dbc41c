"""``python -m grail_duckdb``: see :mod:`grail_duckdb.tools.cli`."""
from .tools.cli import main

raise SystemExit(main())
