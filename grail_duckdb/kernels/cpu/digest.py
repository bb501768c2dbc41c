"""The index file's leaf hash: a 4-lane multiply-rotate hash of a byte range, 128 bits out.

Every byte an index load reads is hashed once on save and once on load (6 GB for a 438M-edge
index). sha256, even with the SHA-NI instructions, runs about 2 GB/s per core and was a fifth of
the load's thread time; this runs at memory speed (about 20 GB/s per core) and releases the GIL,
so each worker thread hashes its own row group beside the others.

It guards against damage (a flipped, lost or shifted byte, a truncated or re-encoded file), not
against forgery: the root digest sits in the same file as the bytes it covers, so anyone who can
change the bytes can rewrite the digest, and a cryptographic hash would add nothing but time.
The round is the one of the xxHash family (an accumulator per lane: add the word times one odd
constant, rotate, multiply by another); the lanes are mixed into two 64-bit words and each is
avalanched, with the length folded in, so equal bytes at another length hash apart.
"""
from __future__ import annotations

import numpy as np
from numba import njit

_P1 = np.uint64(0x9E3779B185EBCA87)
_P2 = np.uint64(0xC2B2AE3D27D4EB4F)
_P3 = np.uint64(0x165667B19E3779F9)
_P4 = np.uint64(0x85EBCA77C2B2AE63)


@njit(cache=True, nogil=True, inline="always")
def _rotl(x, r):
    return (x << np.uint64(r)) | (x >> np.uint64(64 - r))


@njit(cache=True, nogil=True, inline="always")
def _round(acc, word):
    return _rotl(acc + word * _P2, 31) * _P1


@njit(cache=True, nogil=True, inline="always")
def _avalanche(h):
    h ^= h >> np.uint64(33)
    h *= _P2
    h ^= h >> np.uint64(29)
    h *= _P3
    h ^= h >> np.uint64(32)
    return h


@njit(cache=True, nogil=True, boundscheck=False)
def hash_words(words, tail, length):
    """Two 64-bit words of hash over ``words`` (the range's whole 8-byte words, little-endian,
    possibly unaligned) then ``tail`` (its last ``length % 8`` bytes as one word); ``length``
    is the range's size in bytes."""
    a0, a1, a2, a3 = _P1 + _P2, _P2, np.uint64(0), np.uint64(0) - _P1
    n = words.shape[0]
    for i in range(n // 4):
        a0 = _round(a0, words[4 * i])
        a1 = _round(a1, words[4 * i + 1])
        a2 = _round(a2, words[4 * i + 2])
        a3 = _round(a3, words[4 * i + 3])
    for i in range(n - n % 4, n):
        a0 = _round(a0, words[i])
        a0, a1, a2, a3 = a1, a2, a3, a0
    a0 = _round(a0, tail)
    size = np.uint64(length)
    low = _rotl(a0, 1) + _rotl(a1, 7) + _rotl(a2, 12) + _rotl(a3, 18)
    high = (a0 * _P4) ^ _rotl(a1 * _P3, 23) ^ _rotl(a2 * _P2, 41) ^ _rotl(a3 * _P1, 53)
    return _avalanche(low ^ size), _avalanche(high + size * _P4)


def hash_bytes(data) -> bytes:
    """The 16-byte hash of a buffer (bytes, memoryview, NumPy array) without copying it.

    >>> hash_bytes(b"grail") != hash_bytes(b"grail\\x00")
    True
    >>> len(hash_bytes(memoryview(b"x" * 100)[3:]))
    16
    """
    view = memoryview(data).cast("B")
    whole = len(view) // 8
    words = np.frombuffer(view, np.uint64, count=whole)
    tail = int.from_bytes(view[8 * whole:], "little")
    low, high = hash_words(words, np.uint64(tail), len(view))
    return int(low).to_bytes(8, "little") + int(high).to_bytes(8, "little")
