// Whole-array helpers of the build: compressed rows from sorted packed edges, the edges between
// components, the fingerprints and component numbering. Twins of csr_of_pairs, component_pairs,
// edge_hash_sum, key_hash_sum and rank_by_first_occurrence in grail_duckdb/kernels/cpu/graph.py
// (sorting the packed edges is CuPy's radix sort).
#include "common.cuh"

// Edges travel packed: one u64 per edge, src << 32 | dst (ids are below 2^31). Sorted, the
// edges of a row are contiguous and ordered by target, duplicates adjacent.
#define PAIR_ITEMS 16
#define PAIR_TILE (256 * PAIR_ITEMS)

__device__ __forceinline__ unsigned pair_row(u64 x) { return (unsigned)(x >> 32); }

// Kept: not a self-loop, not equal to the sorted predecessor.
__device__ __forceinline__ bool pair_kept(const u64* p, i64 i) {
    const u64 x = p[i];
    return pair_row(x) != (unsigned)x && (i == 0 || p[i - 1] != x);
}

// Exclusive prefix sum of one int per thread over the block (blockDim.x == 256); also the total.
__device__ int block_exclusive_scan(int x, int* total) {
    __shared__ int warp_sum[32];
    const int lane = threadIdx.x & 31, wid = threadIdx.x >> 5;
    const int incl = warp_inclusive_scan(x);
    if (lane == 31) warp_sum[wid] = incl;
    __syncthreads();
    int before = 0, all = 0;
    for (int w = 0; w < (int)(blockDim.x >> 5); ++w) {
        if (w < wid) before += warp_sum[w];
        all += warp_sum[w];
    }
    __syncthreads();
    *total = all;
    return before + incl - x;
}

// This thread's share of a tile: its PAIR_ITEMS pairs from *lo; returns how many kept pairs
// of the tile come before them (*total: the tile's kept pairs).
__device__ int tile_share(i64 m, const u64* p, i64 tile, i64* lo, int* total) {
    *lo = tile * PAIR_TILE + (i64)threadIdx.x * PAIR_ITEMS;
    int c = 0;
    for (int k = 0; k < PAIR_ITEMS; ++k)
        if (*lo + k < m) c += pair_kept(p, *lo + k);
    return block_exclusive_scan(c, total);
}

// Pass 1: kept edges per tile of PAIR_TILE consecutive sorted pairs.
extern "C" __global__ void pairs_count_kernel(i64 m, const u64* p, i64* tile_count) {
    const i64 tiles = (m + PAIR_TILE - 1) / PAIR_TILE;
    for (i64 tile = blockIdx.x; tile < tiles; tile += gridDim.x) {
        i64 lo;
        int total;
        tile_share(m, p, tile, &lo, &total);
        if (threadIdx.x == 0) tile_count[tile] = total;
    }
}

// Pass 2: each kept edge writes its target at its rank among the kept ones (tile_base: the
// exclusive prefix sum of pass 1); where a new row begins, the row starts of every row up to it
// are written (rows without edges get the next row's start), and the last pair closes the rows
// up to n. Output: indptr (int64[n + 1]) and indices (int32), rows sorted, duplicates dropped.
extern "C" __global__ void pairs_write_kernel(i64 m, const u64* p, const i64* tile_base, int n,
                                              i64* indptr, int* indices) {
    const i64 tiles = (m + PAIR_TILE - 1) / PAIR_TILE;
    for (i64 tile = blockIdx.x; tile < tiles; tile += gridDim.x) {
        i64 lo;
        int total;
        i64 out = tile_base[tile] + tile_share(m, p, tile, &lo, &total);
        for (int k = 0; k < PAIR_ITEMS && lo + k < m; ++k) {
            const i64 i = lo + k;
            const u64 x = p[i];
            const int row = (int)pair_row(x);
            const int prev_row = i == 0 ? -1 : (int)pair_row(p[i - 1]);
            for (int r = prev_row + 1; r <= row; ++r) indptr[r] = out;
            const bool kept = pair_kept(p, i);
            if (kept) indices[out++] = (int)(unsigned)x;
            if (i == m - 1)
                for (int r = row + 1; r <= n; ++r) indptr[r] = out;
        }
    }
}

// Every edge of a CSR as a packed pair of components: comp[row] << 32 | comp[target] (the
// row found by binary search over indptr, so the scratch is the output alone).
extern "C" __global__ void component_pairs_kernel(int n, i64 m, const i64* ptr, const int* idx,
                                                  const int* comp, u64* out) {
    for (i64 e = thread_rank(); e < m; e += thread_count()) {
        int a = 0, b = n - 1;  // last row a with ptr[a] <= e
        while (a < b) {
            const int mid = (a + b + 1) >> 1;
            if (ptr[mid] <= e) a = mid; else b = mid - 1;
        }
        out[e] = ((u64)(unsigned)comp[a] << 32) | (u64)(unsigned)comp[idx[e]];
    }
}

// The reverse of a CSR (every edge v -> w as w -> v) with no scratch beyond a cursor per row
// (twin: reverse_rows in grail_duckdb/kernels/cpu/graph.py). reverse_count_kernel counts each
// target's in-edges into counts[w + 1]; the host turns the counts into row starts;
// reverse_write_kernel puts each edge's source at its target's next free slot, one warp per
// source row. The atomics decide the order within a reversed row: nothing that reads the
// reverse DAG (the exact search, the ancestor traversal) depends on it.
extern "C" __global__ void reverse_count_kernel(i64 m, const int* idx, unsigned long long* counts) {
    for (i64 e = thread_rank(); e < m; e += thread_count()) atomicAdd(&counts[idx[e] + 1], 1ull);
}

extern "C" __global__ void reverse_write_kernel(int n, const i64* ptr, const int* idx,
                                                const i64* rptr, int* cursor, int* ridx) {
    const int lane = threadIdx.x & 31;
    for (int v = thread_rank() >> 5; v < n; v += thread_count() >> 5)
        for (i64 e = ptr[v] + lane; e < ptr[v + 1]; e += 32) {
            const int w = idx[e];
            ridx[rptr[w] + atomicAdd(&cursor[w], 1)] = v;
        }
}

// The level of each edge's far end, int16, saturated at EDGE_LEVEL_CAP (twin: edge_levels in
// grail_duckdb/kernels/cpu/graph.py): what the exact search reads beside a CSR's indices.
extern "C" __global__ void edge_levels_kernel(i64 m, const int* idx, const int* level,
                                              short* out) {
    for (i64 e = thread_rank(); e < m; e += thread_count())
        out[e] = (short)min(level[idx[e]], EDGE_LEVEL_CAP);
}

// Sum over packed edges of mix64(src << 32 | dst), modulo 2^64: an order-independent fingerprint.
extern "C" __global__ void hash_sum_kernel(i64 m, const u64* pairs, u64* out) {
    u64 acc = 0ull;
    for (i64 e = thread_rank(); e < m; e += thread_count())
        acc += mix64(pairs[e]);
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
