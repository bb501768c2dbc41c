"""Arrays that grow by rows at their end: an appended index's arrays without a copy per append.

An index's per-component arrays (its labels, the condensed DAG's rows and children) and the
component of each vertex gain rows at their end when a batch of new vertices is appended
(:mod:`.append`). Each array is a view of the first rows of a larger allocation, its
:class:`Room`; an append writes its rows into the room's free rows when the array it extends
is the room's newest (so an index that was appended to once is never overwritten by an append
to the same older index) and there is room, else it moves the rows to a new allocation
``GROWTH`` times their count. The rows of an array are never written again once an index
holds them, so an older index keeps answering as it did.

>>> import numpy as np
>>> a, room = grow(np, np.arange(3), np.array([3, 4]), None)
>>> b, room2 = grow(np, a, np.array([5]), room)
>>> b.tolist(), room2 is room, np.shares_memory(a, b)
([0, 1, 2, 3, 4, 5], True, True)
>>> c, room3 = grow(np, a, np.array([9]), room)   # a second append to the older array: a copy
>>> c.tolist(), b.tolist(), room3 is room
([0, 1, 2, 3, 4, 9], [0, 1, 2, 3, 4, 5], False)
"""
from __future__ import annotations

import threading
from dataclasses import dataclass, field

#: an allocation made for an append holds this many times the rows it must hold (the rows of
#: about 20 appends of 1% each before the next move)
GROWTH = 1.25


@dataclass(eq=False)
class Room:
    """An allocation whose first ``used`` rows an index holds; the rest is free."""

    buf: object
    used: int
    lock: threading.Lock = field(default_factory=threading.Lock)


def _address(xp, a) -> int:
    return int(a.data.ptr) if xp.__name__ == "cupy" else int(a.__array_interface__["data"][0])


def grow(xp, view, rows, room: Room | None):
    """``(view with rows after it, room)``: in the free rows of ``room`` when ``view`` is its
    newest prefix and they fit, else in a new allocation (a new room)."""
    n, r = int(view.shape[0]), int(rows.shape[0])
    if room is not None and n + r <= room.buf.shape[0] and (
            n == 0 or _address(xp, view) == _address(xp, room.buf)):
        with room.lock:
            if room.used == n:
                room.buf[n:n + r] = rows
                room.used = n + r
                return room.buf[:n + r], room
    cap = max(n + r, int((n + r) * GROWTH) + 16)
    buf = xp.empty((cap,) + tuple(view.shape[1:]), view.dtype)
    buf[:n] = view
    buf[n:n + r] = rows
    return buf[:n + r], Room(buf, n + r)
