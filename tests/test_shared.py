"""``grail_duckdb/kernels/shared.py``, the constants and functions both backends share: the
generated CUDA header holds every one of them (and the CUDA sources define none of their own),
and each function agrees with a plain Python statement of it (``tests/references.py``) on random
inputs, on the CPU and, where there is a GPU, compiled from the header on the device."""
from __future__ import annotations

import re

import numpy as np
import pytest

import references as ref
from grail_duckdb.kernels import gpu_available, shared
from grail_duckdb.resources import cuda_dir

U64 = np.uint64


def _sources() -> str:
    d = cuda_dir()
    return "\n".join(p.read_text() for p in sorted(d.iterdir()) if p.suffix in (".cu", ".cuh"))


def test_cuda_header_defines_every_constant_and_function():
    h = shared.cuda_header()
    for code, name in enumerate(shared.STATUS_NAMES):
        assert f"#define {name} {code}\n" in h
    assert f"#define ORDER_BLOCK {shared.ORDER_BLOCK}\n" in h
    assert f"#define HUB_WORDS {shared.HUB_WORDS}\n" in h
    for name, value in shared.SPLITMIX.items():
        assert f"#define {name} {value:#x}ull\n" in h
    for name, (ret, args, steps, result) in shared.FUNCTIONS.items():
        m = re.search(rf"__device__ __forceinline__ (unsigned long long|bool) {name}\(([^)]*)\)"
                      rf" \{{(.*)\}}\n", h)
        assert m, name
        assert m.group(1) == ("bool" if ret == "bool" else "unsigned long long")
        assert [p.split()[-1] for p in m.group(2).split(",")] == [a for _, a in args]
        body = m.group(3)
        for var, expr in steps:
            assert f"{var} = {expr};" in body, (name, expr)
        assert f"return {result};" in body


def test_cuda_sources_define_no_shared_constant_or_function_of_their_own():
    """What shared.py writes once must not be hand-copied into kernels/*.cu again."""
    src = _sources()
    for name in (*shared.STATUS_NAMES, "ORDER_BLOCK", "HUB_WORDS", *shared.SPLITMIX):
        assert not re.search(rf"#define\s+{name}\b", src), name
    for name in shared.FUNCTIONS:
        assert not re.search(rf"\b{name}\s*\([^;{{)]*\)\s*\{{", src), name
        assert re.search(rf"\b{name}\s*\(", src), f"{name} is never used by the CUDA sources"


def _random_u64(rng, count):
    x = rng.integers(0, 2**63, count, dtype=np.uint64) * U64(2) + rng.integers(0, 2, count,
                                                                                   dtype=np.uint64)
    return np.concatenate([x, np.array([0, 1, 2**63, 2**64 - 1], np.uint64)])


def test_mix64_matches_the_python_statement():
    rng = np.random.default_rng(1)
    for x in _random_u64(rng, 500):
        assert int(shared.mix64(x)) == ref.mix64(int(x))
    assert ref.mix64(1) == 0x910A2DEC89025CC1


def test_permute_step_matches_and_is_a_bijection_of_each_small_mask():
    rng = np.random.default_rng(2)
    for bits in range(1, 11):
        mask = (1 << bits) - 1
        for _ in range(3):
            a1, a2 = (int(rng.integers(0, 2**62)) * 2 + 1 for _ in range(2))
            c = int(rng.integers(0, 2**63))
            shift = max(bits // 2, 1)
            got = [int(shared.permute_step(U64(x), U64(mask), U64(a1 & mask), U64(c & mask),
                                           U64(a2 & mask), U64(shift)))
                   for x in range(mask + 1)]
            want = [ref.permute_step(x, mask, a1 & mask, c & mask, a2 & mask, shift)
                    for x in range(mask + 1)]
            assert got == want
            assert sorted(got) == list(range(mask + 1)), (bits, a1, c, a2)


@pytest.mark.parametrize("n_blocks", [0, 1, 2, 3, 5, 64, 65, 1000])
def test_order_params_give_a_permutation_of_the_blocks(n_blocks):
    for label in range(3):
        mask, a1, c, a2, shift, xor = (int(p) for p in shared.order_params(n_blocks, label, 9))
        assert mask + 1 >= max(n_blocks, 2) and a1 & 1 and a2 & 1 and 0 <= xor < 64
        walk = [ref.permute_step(x, mask, a1, c, a2, shift) for x in range(mask + 1)]
        assert sorted(walk) == list(range(mask + 1))
    rank = ref.vertex_rank(n_blocks * shared.ORDER_BLOCK, 0, 9)  # asserts the block order
    assert sorted(rank.tolist()) == list(range(n_blocks * shared.ORDER_BLOCK))


def _predicate_inputs(rng, count=400):
    ints = rng.integers(-3, 4, (count, 4))
    hubs = _random_u64(rng, 4 * count)[: 4 * count].reshape(count, 4)
    hubs[: count // 2] &= U64(0xF)  # small words: overlaps and containments happen often
    return ints, hubs


def _python_predicates(ints, hubs):
    """The five predicates of shared.FUNCTIONS, stated in Python, one row per input."""
    out = []
    for (a, b, c, d), (h0, h1, h2, h3) in zip(ints.tolist(), hubs.tolist()):
        out.append((a >= b, c < a or d > b, a <= c <= b,
                    ((h2 & ~h0) | (h1 & ~h3)) != 0, (h0 & h3) != 0))
    return np.array(out, bool)


def test_cut_predicates_match_the_python_statement():
    ints, hubs = _predicate_inputs(np.random.default_rng(3))
    got = np.array([(shared.level_excludes(a, b), shared.label_excludes(a, b, c, d),
                     shared.tree_contains(a, b, c),
                     shared.hubs_exclude(h0, h1, h2, h3), shared.hubs_meet(h0, h3))
                    for (a, b, c, d), (h0, h1, h2, h3) in zip(ints.tolist(), hubs)], bool)
    np.testing.assert_array_equal(got, _python_predicates(ints, hubs))


_EVAL = r"""
extern "C" __global__ void eval_shared(int n, const unsigned long long* x,
                                       const unsigned long long* perm, const int* ints,
                                       const unsigned long long* hubs, unsigned long long* mixed,
                                       unsigned long long* permuted, bool* pred) {
    const int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= n) return;
    const unsigned long long* p = perm + 6 * i;
    const int* a = ints + 4 * i;
    const unsigned long long* h = hubs + 4 * i;
    mixed[i] = mix64(x[i]);
    permuted[i] = permute_step(p[0], p[1], p[2], p[3], p[4], p[5]);
    pred[5 * i + 0] = level_excludes(a[0], a[1]);
    pred[5 * i + 1] = label_excludes(a[0], a[1], a[2], a[3]);
    pred[5 * i + 2] = tree_contains(a[0], a[1], a[2]);
    pred[5 * i + 3] = hubs_exclude(h[0], h[1], h[2], h[3]);
    pred[5 * i + 4] = hubs_meet(h[0], h[3]);
}
"""


@pytest.mark.gpu
@pytest.mark.skipif(not gpu_available(), reason="no CUDA device visible to CuPy")
def test_the_header_computes_the_same_on_the_device():
    import cupy as cp

    rng = np.random.default_rng(4)
    ints, hubs = _predicate_inputs(rng)
    n = ints.shape[0]
    x = _random_u64(rng, n)[:n]
    mask = (np.uint64(1) << rng.integers(1, 20, n).astype(np.uint64)) - U64(1)
    perm = np.stack([_random_u64(rng, n)[:n] & mask, mask, _random_u64(rng, n)[:n] & mask | U64(1),
                     _random_u64(rng, n)[:n] & mask, _random_u64(rng, n)[:n] & mask | U64(1),
                     rng.integers(1, 10, n).astype(np.uint64)], axis=1)
    fn = cp.RawModule(code=shared.cuda_header() + _EVAL,
                      options=("-std=c++17",)).get_function("eval_shared")
    mixed, permuted = cp.empty(n, cp.uint64), cp.empty(n, cp.uint64)
    pred = cp.empty((n, 5), cp.bool_)
    fn(((n + 127) // 128,), (128,), (np.int32(n), cp.asarray(x), cp.asarray(perm),
                                    cp.asarray(ints.astype(np.int32)), cp.asarray(hubs), mixed,
                                    permuted, pred))
    assert mixed.get().tolist() == [ref.mix64(int(v)) for v in x]
    assert permuted.get().tolist() == [ref.permute_step(*(int(v) for v in row)) for row in perm]
    np.testing.assert_array_equal(pred.get(), _python_predicates(ints, hubs))
