"""Constants and small functions shared by the CPU (Numba) and GPU (CUDA) kernels, written once.

Each shared function is written here as a few assignments and a result in the subset of syntax
that C and Python read alike (fully parenthesised ``+ * & | ^ ~ >> << < <= >= > != ==``,
``U(x)`` for an unsigned 64-bit value). :func:`cuda_header` turns them, with every shared
constant, into a header that :mod:`.gpu` prepends to ``kernels/*.cu``; the Numba twins import the
compiled Python versions from this module. A change here reaches both backends at once.

(Numba caches a compiled kernel by its own file's time stamp; after changing a function here
during development, delete the ``__pycache__`` folders of ``grail_duckdb/kernels/cpu`` so the
kernels that inline it are compiled again. A fresh install always compiles afresh.)

>>> int(mix64(np.uint64(1))) == 0x910A2DEC89025CC1
True
>>> bool(tree_contains(2, 5, 3)), bool(tree_contains(2, 5, 6))
(True, False)
"""
from __future__ import annotations

import numpy as np

from ..jit import njit
from .records import RECORD_LABELS, RECORD_LEVEL

# --- status codes of the query classification (index = code) --------------------------------------
#: how each pair of a query call was settled; the kernels count every code (the call's statistics)
STATUS_NAMES = ("UNDECIDED", "SAME_COMPONENT", "LEVEL_CUT", "LABEL_CUT", "TREE_CUT", "HUB_CUT",
                "SAME_VERTEX", "UNKNOWN", "NULL_PAIR", "SAME_KEY", "PROBE_REACHES",
                "PROBE_EXCLUDES", "DEFERRED")
(UNDECIDED, SAME_COMPONENT, LEVEL_CUT, LABEL_CUT, TREE_CUT, HUB_CUT, SAME_VERTEX, UNKNOWN,
 NULL_PAIR, SAME_KEY, PROBE_REACHES, PROBE_EXCLUDES, DEFERRED) = range(13)
N_STATUS = len(STATUS_NAMES)
#: status codes whose answer is true (SAME_KEY: two equal keys that are not vertices)
SETTLED_TRUE = (SAME_COMPONENT, TREE_CUT, HUB_CUT, SAME_VERTEX, SAME_KEY, PROBE_REACHES)
#: the same as a bit mask over the codes (bit c set: code c answers true)
SETTLED_TRUE_MASK = sum(1 << c for c in SETTLED_TRUE)
#: answer of each status code (index = code), for the CPU twins
ANSWER_OF = np.array([(SETTLED_TRUE_MASK >> c) & 1 for c in range(N_STATUS)], np.bool_)

# --- how query keys become vertex ids -------------------------------------------------------------
#: dense table (id of key - offset, or -1), sorted keys (binary search), keys that already are
#: ids (string keys, looked up on the host: -1 is NULL, -2 - k the k-th distinct unknown key), or
#: a range (keys offset .. offset + size - 1 are ids 0 .. size - 1: no table to read)
LOOKUP_NAMES = ("LOOKUP_DENSE", "LOOKUP_SORTED", "LOOKUP_IDS", "LOOKUP_RANGE")
LOOKUP_DENSE, LOOKUP_SORTED, LOOKUP_IDS, LOOKUP_RANGE = range(4)

#: seconds between two calls of an exact search's checkpoint (progress, cancel), both backends
CHECK_EVERY = 0.1

#: the per-edge levels of the exact search (``Kernels.edge_levels``: int16, the level of each
#: edge's far end) saturate here: a stored level below it is the level, one equal to it says
#: only "at least this", so the search trusts it where a lower bound is enough
EDGE_LEVEL_CAP = 32767

#: depth of the bounded per-pair search's stack (a pair whose search needs more is deferred)
PROBE_STACK = 32

#: vertices are permuted in blocks of this many consecutive ids (cache lines stay whole)
ORDER_BLOCK = 64
#: 64-bit words of hub bits per component (64 hubs per word)
HUB_WORDS = 2
#: 64-bit words per side of the level-window hub bits
#: (:func:`grail_duckdb.engine.labels.window_hubs`): each component keeps 64 * WIN_WORDS bits for
#: the window hubs from its own level down, and as many for those down to its own level
WIN_WORDS = 2
#: levels a window spans on average: the window hubs are one per WINDOW_LEVELS / (64 * WIN_WORDS)
#: levels (measured on the 2.5B-edge citation DAG: 512 levels of 128 hubs settled more pairs
#: than 1024, 256 or 128 levels, or 256 hubs over 256 levels)
WINDOW_LEVELS = 512
#: the columns of the labels' ``tree`` matrix, one 16-byte row per component (a query reads
#: both trees of a vertex in one load): the interval ``[lo, post]`` of the vertex's subtree in
#: the tree of parents, then in the tree of chosen children (:mod:`grail_duckdb.engine.labels`)
TREE_COLUMNS = ("tree_lo", "tree_post", "rtree_lo", "rtree_post")

#: splitmix64 constants (Steele et al.): a cheap, well-mixed 64-bit hash used to pick sibling
#: orders and fingerprints identically on every backend
SPLITMIX = {"SM_GAMMA": 0x9E3779B97F4A7C15, "SM_M1": 0xBF58476D1CE4E5B9,
            "SM_M2": 0x94D049BB133111EB}

#: name -> (C return type, ((C type, argument), ...), ((variable, expression), ...), result)
FUNCTIONS = {
    # splitmix64 finaliser of a uint64
    "mix64": ("u64", (("u64", "x"),), (
        ("x", "x + SM_GAMMA"),
        ("x", "(x ^ (x >> U(30))) * SM_M1"),
        ("x", "(x ^ (x >> U(27))) * SM_M2"),
    ), "x ^ (x >> U(31))"),
    # one step of the bijection of the k-bit integers behind each label's vertex order
    # (multiply by an odd number, add, xor-shift, multiply, xor-shift), cycle-walked by callers
    "permute_step": ("u64", (("u64", "x"), ("u64", "mask"), ("u64", "a1"), ("u64", "c"),
                             ("u64", "a2"), ("u64", "shift")), (
        ("x", "((x * a1) + c) & mask"),
        ("x", "x ^ (x >> shift)"),
        ("x", "(x * a2) & mask"),
    ), "x ^ (x >> shift)"),
    # negative cut: an edge always leads at least one topological level down
    "level_excludes": ("bool", (("int", "level_u"), ("int", "level_t")), (),
                       "level_u >= level_t"),
    # the level cut of an edge of the exact search from the stored level lw of its far end w
    # (saturated: lw <= level(w), equal below EDGE_LEVEL_CAP): forward (fwd != 0), the child w
    # is at or below t's level; backward, the parent w is at or below s's level, which needs
    # lw to be w's level itself
    "edge_level_excludes": ("bool", (("int", "fwd"), ("int", "lw"), ("int", "level_s"),
                                     ("int", "level_t")), (),
                            "((fwd != 0) & (lw >= level_t)) | ((fwd == 0) & "
                            "(lw < EDGE_LEVEL_CAP) & (level_s >= lw))"),
    # negative cut, per label: t's interval is not inside u's
    "label_excludes": ("bool", (("int", "inner_u"), ("int", "outer_u"), ("int", "inner_t"),
                                ("int", "outer_t")), (),
                       "(inner_t < inner_u) | (outer_t > outer_u)"),
    # negative cut, per hub word: t reaches a hub that u does not, or a hub reaches u but not t
    "hubs_exclude": ("bool", (("u64", "down_u"), ("u64", "up_u"), ("u64", "down_t"),
                              ("u64", "up_t")), (),
                     "((down_t & (~down_u)) | (up_u & (~up_t))) != U(0)"),
    # positive cut: t lies in u's spanning-tree interval
    "tree_contains": ("bool", (("int", "lo_u"), ("int", "post_u"), ("int", "post_t")), (),
                      "(lo_u <= post_t) & (post_t <= post_u)"),
    # positive cut, per hub word: u reaches a hub that reaches t
    "hubs_meet": ("bool", (("u64", "down_u"), ("u64", "up_t")), (), "(down_u & up_t) != U(0)"),
    # one word of a bit set shifted r bits (0 <= r < 64) towards its high end: the word's own
    # bits moved up, the top r bits of the word below it moved in (the window hubs' rebasing)
    "funnel": ("u64", (("u64", "lo"), ("u64", "hi"), ("u64", "r")), (),
               "(hi << r) | ((lo >> U(1)) >> (U(63) - r))"),
}


def _python_function(name: str):
    """The Numba version of one shared function (compiled on first use, inlined by callers)."""
    _, args, steps, result = FUNCTIONS[name]
    lines = [f"def {name}({', '.join(a for _, a in args)}):"]
    lines += [f"    {var} = {expr}" for var, expr in steps]
    lines.append(f"    return {result}")
    namespace = {"U": np.uint64, "EDGE_LEVEL_CAP": EDGE_LEVEL_CAP,
                 **{k: np.uint64(v) for k, v in SPLITMIX.items()}}
    exec(compile("\n".join(lines) + "\n", f"<grail_duckdb shared {name}>", "exec"), namespace)
    return njit(inline="always", nogil=True)(namespace[name])


mix64 = _python_function("mix64")
permute_step = _python_function("permute_step")
level_excludes = _python_function("level_excludes")
edge_level_excludes = _python_function("edge_level_excludes")
label_excludes = _python_function("label_excludes")
hubs_exclude = _python_function("hubs_exclude")
tree_contains = _python_function("tree_contains")
hubs_meet = _python_function("hubs_meet")
funnel = _python_function("funnel")


def pack_pairs(xp, src, dst, out=None):
    """Edges of dense ids (below 2**31) packed one per uint64, ``src << 32 | dst``: the one
    64-bit copy of the edge list that the CSR, the condensation and the fingerprint read.
    ``xp`` is NumPy or CuPy; ``out`` (uint64) receives them when given.

    >>> pack_pairs(np, np.array([1, 0]), np.array([2, 3])).tolist()
    [4294967298, 3]
    """
    hi = xp.asarray(src).astype(xp.uint64) << xp.uint64(32)
    lo = xp.asarray(dst).astype(xp.uint64)
    if out is None:
        return hi | lo
    xp.bitwise_or(hi, lo, out=out)
    return out


#: packed edges swapped per step of :func:`swap_pairs` (bounds the temporaries)
_SWAP_STEP = 1 << 26


def swap_pairs(xp, pairs) -> None:
    """``src << 32 | dst`` -> ``dst << 32 | src``, in place, slice by slice."""
    for lo in range(0, pairs.shape[0], _SWAP_STEP):
        part = pairs[lo:lo + _SWAP_STEP]
        xp.bitwise_or(part << xp.uint64(32), part >> xp.uint64(32), out=part)


def unpack_pairs(xp, pairs):
    """``(src, dst)`` int32 columns of packed edges (the inverse of :func:`pack_pairs`)."""
    return ((pairs >> xp.uint64(32)).astype(xp.int32),
            (pairs & xp.uint64(0xFFFFFFFF)).astype(xp.int32))


def cuda_header() -> str:
    """The C text of every shared constant and function, for the CUDA compile."""
    out = ["// generated by grail_duckdb/kernels/shared.py: do not edit",
           "#define U(x) ((unsigned long long)(x##ull))"]
    out += [f"#define {name} {code}" for code, name in enumerate(STATUS_NAMES)]
    out += [f"#define {name} {code}" for code, name in enumerate(LOOKUP_NAMES)]
    out += [f"#define N_STATUS {N_STATUS}", f"#define SETTLED_TRUE_MASK {SETTLED_TRUE_MASK}u",
            f"#define PROBE_STACK {PROBE_STACK}", f"#define EDGE_LEVEL_CAP {EDGE_LEVEL_CAP}"]
    out += [f"#define ORDER_BLOCK {ORDER_BLOCK}", f"#define HUB_WORDS {HUB_WORDS}",
            f"#define WIN_WORDS {WIN_WORDS}"]
    out += [f"#define RECORD_LEVEL {RECORD_LEVEL}", f"#define RECORD_LABELS {RECORD_LABELS}"]
    out += [f"#define {k} {v:#x}ull" for k, v in SPLITMIX.items()]
    for name, (ret, args, steps, result) in FUNCTIONS.items():
        params = ", ".join(f"{'unsigned long long' if t == 'u64' else t} {a}" for t, a in args)
        ctype = "unsigned long long" if ret == "u64" else ret
        body = "".join(f" {var} = {expr};" for var, expr in steps)
        out.append(f"__device__ __forceinline__ {ctype} {name}({params}) {{{body} "
                   f"return {result}; }}")
    return "\n".join(out) + "\n"


@njit(nogil=True, cache=True)
def order_params(n_blocks, label, seed):
    """Parameters of label ``label``'s vertex order: (mask, a1, c, a2, shift, xor), uint64.

    Both backends compute them on the host with this one function."""
    bits = 1
    while (np.uint64(1) << np.uint64(bits)) < np.uint64(max(n_blocks, 2)):
        bits += 1
    mask = (np.uint64(1) << np.uint64(bits)) - np.uint64(1)
    h = mix64(np.uint64(seed) * np.uint64(64) + np.uint64(label))
    a1 = (mix64(h) & mask) | np.uint64(1)
    c = mix64(h + np.uint64(1)) & mask
    a2 = (mix64(h + np.uint64(2)) & mask) | np.uint64(1)
    xor = mix64(h + np.uint64(3)) & np.uint64(ORDER_BLOCK - 1)
    return mask, a1, c, a2, np.uint64(max(bits // 2, 1)), xor


def unit_words(unit: np.ndarray, length: int) -> np.ndarray:
    """A bool mask as uint64 words, padded with False to ``length`` bits (bit i of word k:
    entry 64 k + i; the reach counts' batches of sources on either backend).

    >>> unit_words(np.array([True, False, True]), 65).tolist()
    [5, 0]
    """
    padded = np.zeros(-(-length // 64) * 64, np.bool_)
    padded[:unit.shape[0]] = unit
    return np.packbits(padded, bitorder="little").view("<u8").astype(np.uint64)


# --- Parquet pages: the tables the page kernels (kernels/pages.cu, cpu/pages.py) share -----
#: columns of a page table (``pages_kernel`` in ``kernels/pages.cu``, ``cpu.pages.page_values``):
#: where the page's bytes start in the source and how many there are, its bytes once
#: decompressed, where they go in the scratch, its first row in the row group, its rows,
#: its value width in bytes, its flags (``PAGE_LZ4``, ``PAGE_SPLIT``), and (device only) the
#: address of the column's destination
PAGE_COLUMNS = 9
(PAGE_SRC, PAGE_LEN, PAGE_RAW, PAGE_SCRATCH, PAGE_ROW, PAGE_ROWS, PAGE_WIDTH, PAGE_FLAGS,
 PAGE_DST) = range(PAGE_COLUMNS)
#: the page's bytes are one LZ4 block (Parquet's LZ4_RAW); else they are stored as they are
PAGE_LZ4 = 1
#: the values are byte-stream-split (byte k of every value, then byte k + 1); else PLAIN
PAGE_SPLIT = 2
#: bytes of a page that one warp (one call of the encoder's chunk parser) parses: its
#: positions and the matches it finds stay within them, so that a 1 MiB page is parsed by 16 warps at once
CHUNK = 1 << 16
#: hash slots of the encoder, each a position of the chunk (from its start; ``_EMPTY`` where
#: none) whose 5 bytes have that hash: 8 KiB of uint16, a warp's shared memory on the device
HASH_BITS = 12
EMPTY_SLOT = 0xFFFF
#: positions the encoder looks at together (a warp's lanes on the device)
WINDOW = 32


def lz4_bound(n: int) -> int:
    """Bytes that an LZ4 block of ``n`` bytes may take (LZ4's worst case; ``n`` an int or an
    integer array).

    >>> lz4_bound(65536)
    65809
    """
    return n + n // 255 + 16


#: columns of the chunk table (the encoder's ``parse_chunks`` and ``emit_chunks``): where the
#: chunk's page starts in the source, the page's bytes, the chunk's first and end byte in the page,
#: where its other sequences go in the scratch (:func:`lz4_bound` of its bytes each)
CHUNK_COLUMNS = 5
CH_PAGE, CH_BYTES, CH_FIRST, CH_END, CH_REST = range(CHUNK_COLUMNS)
#: what the chunk parser finds in a chunk: its matches, its first sequence (literals
#: from the chunk's start, match offset, match length), the bytes of its other sequences,
#: where its last match ends in the page
RECORD_COLUMNS = 6
REC_MATCHES, REC_LITERALS, REC_OFFSET, REC_MATCH, REC_REST, REC_TAIL = range(RECORD_COLUMNS)
#: columns of a chunk's place (``emit_chunks``): where its bytes go in the output, where
#: in the page the literals of its first sequence start, whether it ends its page
PLACE_COLUMNS = 3
PL_AT, PL_ANCHOR, PL_LAST = range(PLACE_COLUMNS)
