"""``python -m grail_duckdb``: see :mod:`grail_duckdb.tools.cli`."""
import os
import sys

from .tools.cli import main

code = main()
sys.stdout.flush()
sys.stderr.flush()
os._exit(code)  # every connection and file is closed: skip the teardown of the imported modules
