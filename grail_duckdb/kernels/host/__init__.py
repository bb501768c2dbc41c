"""Host-side helpers that both backends and the index file use; no backend's kernels.

* :mod:`.transfers`: arrays between host and device (pinned, chunked copies; landings);
* :mod:`.staging`: query keys staged for an upload, build edges packed as key offsets;
* :func:`workers` and :data:`PARALLEL_LOCK`: the host's worker threads, and the lock around
  Numba's parallel regions (its default thread pool is not re-entrant).
"""
from __future__ import annotations

import os
import threading

from .staging import pack_key_offsets, stage_pairs
from .transfers import (TRANSFERS, Landing, TransferSettings, copy_into, is_device_array,
                        mark_ready, on_own_stream, to_host, to_host_all, to_host_columns,
                        upload_pages, upload_staging)

__all__ = ["Landing", "PARALLEL_LOCK", "TRANSFERS", "TransferSettings", "copy_into",
           "is_device_array", "mark_ready", "on_own_stream", "pack_key_offsets", "stage_pairs",
           "to_host", "to_host_all", "to_host_columns", "upload_pages", "upload_staging",
           "workers"]

#: held around every parallel region of Numba (its default thread pool is not re-entrant)
PARALLEL_LOCK = threading.Lock()


def workers() -> int:
    """Threads of the host pools (a build's read, a save, a load): one per core."""
    return max(1, os.cpu_count() or 1)
