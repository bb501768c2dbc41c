// Whole-array helpers of the build: the fingerprints and component numbering. Twins of
// edge_hash_sum, key_hash_sum and rank_by_first_occurrence in grail_duckdb/kernels/cpu/graph.py
// (the rest of those steps is CuPy code).
#include "common.cuh"

// Sum over edges of mix64(src << 32 ^ dst), modulo 2^64: an order-independent fingerprint.
extern "C" __global__ void hash_sum_kernel(i64 m, const int* src, const int* dst, u64* out) {
    u64 acc = 0ull;
    for (i64 e = thread_rank(); e < m; e += thread_count())
        acc += mix64(((u64)(unsigned)src[e] << 32) ^ (u64)(unsigned)dst[e]);
    for (int off = 16; off > 0; off >>= 1) acc += __shfl_down_sync(FULL_MASK, acc, off);
    if ((threadIdx.x & 31) == 0) atomicAdd(out, acc);
}

// Sum over integer keys of mix64(key), modulo 2^64: the keys' part of the fingerprint.
extern "C" __global__ void key_hash_sum_kernel(i64 n, const i64* keys, u64* out) {
    u64 acc = 0ull;
    for (i64 i = thread_rank(); i < n; i += thread_count()) acc += mix64((u64)keys[i]);
    for (int off = 16; off > 0; off >>= 1) acc += __shfl_down_sync(FULL_MASK, acc, off);
    if ((threadIdx.x & 31) == 0) atomicAdd(out, acc);
}

// first[label[v]] = smallest vertex holding that label (first starts at INT_MAX).
extern "C" __global__ void first_kernel(int n, const int* label, int* first) {
    for (int v = thread_rank(); v < n; v += thread_count()) atomicMin(&first[label[v]], v);
}
