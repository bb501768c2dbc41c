"""Arrays that grow by rows at their end: an appended index's arrays without a copy per append.

An index's per-component arrays (its labels, the condensed DAG's rows and children) and the
component of each vertex gain rows at their end when a batch of new vertices is appended
(:mod:`grail_duckdb.engine.append`). Each array is a view of the first rows of a larger
allocation, its :class:`Room`; an append writes its rows into the room's free rows when the
array it extends is the room's newest (so an index that was appended to once is never
overwritten by an append to the same older index) and there is room, else it moves the rows
to a new allocation ``GROWTH`` times their count. The rows of an array are never written
again once an index holds them, so an older index keeps answering as it did.

A build and a load make an index's host arrays with free rows already (:func:`roomy`, pages
the system maps only once written: they cost address space, not memory or time): the first
append to a built or a loaded index copies nothing. An array made elsewhere (a device's, a
caller's) moves once, at its first append.

>>> import numpy as np
>>> a, room = grow(np, np.arange(3), np.array([3, 4]), None)
>>> b, room2 = grow(np, a, np.array([5]), room)
>>> b.tolist(), room2 is room, np.shares_memory(a, b)
([0, 1, 2, 3, 4, 5], True, True)
>>> c, room3 = grow(np, a, np.array([9]), room)   # a second append to the older array: a copy
>>> c.tolist(), b.tolist(), room3 is room
([0, 1, 2, 3, 4, 9], [0, 1, 2, 3, 4, 5], False)
>>> d = roomy(np, (3,), np.int64)
>>> d[:] = 7
>>> e, room4 = grow(np, d, np.array([8]), None)    # the free rows of a load: no copy
>>> e.tolist(), np.shares_memory(d, e)
([7, 7, 7, 8], True)
"""
from __future__ import annotations

import threading
import weakref
from dataclasses import dataclass, field

import numpy as np

#: an allocation made for an append holds this many times the rows it must hold (the rows of
#: about 20 appends of 1% each before the next move)
GROWTH = 1.25


@dataclass(eq=False)
class Room:
    """An allocation whose first ``used`` rows an index holds; the rest is free."""

    buf: object
    used: int
    lock: threading.Lock = field(default_factory=threading.Lock)


#: the rooms of the allocations :func:`roomy` made, by the id of their buffer, while an
#: index's array is a view of it (claimed by the first append, found again by later ones)
_ROOMS: "weakref.WeakValueDictionary[int, Room]" = weakref.WeakValueDictionary()
_ROOMS_LOCK = threading.Lock()


def roomy(xp, shape: tuple, dtype):
    """An uninitialised array of ``shape`` whose allocation has free rows after it (host
    arrays: the system maps their pages only once they are written); an array of ``xp``
    exactly of ``shape`` for a device."""
    if xp is not np:
        return xp.empty(shape, dtype)
    cap = int(shape[0] * GROWTH) + 16
    return np.empty((cap,) + tuple(shape[1:]), dtype)[: shape[0]]


def roomy_zeros(xp, shape: tuple, dtype):
    """:func:`roomy`, zeroed (host arrays: by the system, as each page is first touched)."""
    if xp is not np:
        return xp.zeros(shape, dtype)
    cap = int(shape[0] * GROWTH) + 16
    return np.zeros((cap,) + tuple(shape[1:]), dtype)[: shape[0]]


def _found(xp, view) -> Room | None:
    """The room of a view that :func:`roomy` made (its allocation's first rows), or None."""
    base = getattr(view, "base", None)
    if (xp is not np or base is None or not isinstance(base, np.ndarray) or base.ndim != view.ndim
            or base.shape[1:] != view.shape[1:] or base.shape[0] <= view.shape[0]
            or not base.flags.c_contiguous or _address(xp, view) != _address(xp, base)):
        return None
    with _ROOMS_LOCK:
        room = _ROOMS.get(id(base))
        if room is None or room.buf is not base:
            room = Room(base, view.shape[0])
            _ROOMS[id(base)] = room
        return room


def _address(xp, a) -> int:
    return int(a.data.ptr) if xp.__name__ == "cupy" else int(a.__array_interface__["data"][0])


def grow(xp, view, rows, room: Room | None):
    """``(view with rows after it, room)``: in the free rows of ``room`` when ``view`` is its
    newest prefix and they fit, else in a new allocation (a new room)."""
    n, r = int(view.shape[0]), int(rows.shape[0])
    if room is None:
        room = _found(xp, view)
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
    room = Room(buf, n + r)
    if xp is np:  # found again by a caller that kept the array but not its room
        with _ROOMS_LOCK:
            _ROOMS[id(buf)] = room
    return buf[:n + r], room
