"""The index file's digest: a leaf hash of every row group's bytes, and the root over the
footer's bytes and the leaves (checked on load; a mismatch is a damaged file).

The leaf hash is a 4-lane multiply-rotate hash of a byte range, 128 bits out.

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

import hashlib

import numpy as np

from ..jit import njit
from .format import DIGEST_META_KEY

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


# --- the digest: the bytes as written, hashed where they are written and read ---------------
def leaf_hash(data) -> bytes:
    """The 16-byte hash of a run of the file's bytes
    (:func:`hash_bytes`: damage, not forgery; at memory speed)."""
    return hash_bytes(data)


def group_leaf(children: bytes, early: bytes, own: bytes) -> bytes:
    """One leaf of the digest: a row group's, from the :func:`leaf_hash` of each of its
    spans (:func:`.parts.group_spans`): its children's chunk in the region at the
    front of the file, its early columns' chunks in the region after it, its own bytes (a
    span of no bytes where it has none)."""
    return hash_bytes(children + early + own)


#: the digest's length in the footer (hex digits) and what stands there while it is computed
_DIGEST_CHARS = 32
DIGEST_PLACEHOLDER = "0" * _DIGEST_CHARS
#: the digest's value in the footer's Thrift (compact protocol) bytes comes right after this:
#: KeyValue field 1 (binary) = the key, then field 2's header and length
_DIGEST_LEAD = (b"\x18" + bytes([len(DIGEST_META_KEY)]) + DIGEST_META_KEY.encode()
                + b"\x18" + bytes([_DIGEST_CHARS]))


def digest_site(footer: bytes) -> int:
    """Where the digest's hex digits start in the footer's bytes (``FileMetaData``, as this
    package writes it: the digest is the last key-value pair), or -1."""
    at = footer.rfind(_DIGEST_LEAD)
    return -1 if at < 0 else at + len(_DIGEST_LEAD)


def root_digest(footer: bytes, site: int, leaves: list[bytes]) -> str:
    """The file's digest: the footer's bytes as written (schema, row groups, offsets,
    encodings and all the metadata), with the digest's own digits read as
    :data:`DIGEST_PLACEHOLDER`, and the hash of each row group's column chunks. Any changed
    byte a load reads changes it; the footer is hashed as bytes, so a load does not decode
    it (about half a millisecond per row group in Python)."""
    root = hashlib.blake2b(digest_size=16)
    root.update(footer[:site])
    root.update(DIGEST_PLACEHOLDER.encode())
    root.update(footer[site + _DIGEST_CHARS:])
    for leaf in leaves:
        root.update(leaf)
    return root.hexdigest()
