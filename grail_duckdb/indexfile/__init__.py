"""The index file: one Parquet file per index, written and read on every core, versioned and
digested. docs/index-format.md describes the file for a reader who would implement it.

* :mod:`.format`: the version, the columns and their encodings, every metadata key;
* :mod:`.writer`: :func:`save` and :class:`IndexWriter` (a build's file, written as it goes),
  laying out :mod:`.rows` (the parts: one row group each, encoded on its own thread);
* :mod:`.reader`: :func:`load`, straight into a backend's arrays;
* :mod:`.parts`: one Parquet file from parts encoded apart, under one footer
  (:mod:`.thrift`: Thrift's compact protocol); :mod:`.label_pages`: label columns encoded by
  the backend's page encoder; :mod:`.page_plan` and :mod:`.page_headers`: label pages a load
  decodes itself;
* :mod:`.digest`: the hash that refuses a damaged file; :mod:`.atomic_write`: replacing a
  file safely, never over one that is not an index.

The engine and the file meet in :mod:`grail_duckdb.model`: a save takes an index's
:class:`~grail_duckdb.model.IndexData` fields, a load returns them.
"""
from .format import FORMAT_NAME, FORMAT_VERSION, IndexMeta, read_metadata
from .reader import load
from .rows import SAVE, SaveSettings
from .writer import IndexWriter, save

__all__ = ["FORMAT_NAME", "FORMAT_VERSION", "IndexMeta", "IndexWriter", "SAVE", "SaveSettings",
           "load", "read_metadata", "save"]
