// Shared pieces of the CUDA kernels of grail_duckdb (loaded with cupy.RawModule).
//
// Every traversal here is a Gunrock-style "advance" over a vertex frontier inside one persistent
// cooperative kernel: the grid walks all levels itself and meets at grid.sync() between levels,
// so a deep DAG (thousands of levels) costs one launch and one host sync, not one per level.
#pragma once
#include <cooperative_groups.h>

namespace cg = cooperative_groups;
typedef long long i64;
typedef unsigned long long u64;

#define FULL_MASK 0xffffffffu
// Degree bins of the advance: below WARP_MIN edges a thread walks a row alone, from WARP_MIN a
// whole warp shares it, from GRID_MIN the row is deferred and the whole grid shares it.
#define WARP_MIN 32
#define GRID_MIN 4096

// The constants and small functions shared with the CPU twins (status codes, ORDER_BLOCK, mix64,
// permute_step, the cut predicates) come from grail_duckdb/kernels/shared.py, which generates
// them as a header prepended to these sources when the module is compiled.

__device__ __forceinline__ int thread_rank() { return blockIdx.x * blockDim.x + threadIdx.x; }
__device__ __forceinline__ int thread_count() { return gridDim.x * blockDim.x; }

// Word k of row w of a W-word bit matrix shifted sh bits towards the high end (sh < 0: the low
// end), zeros shifted in: a row rebased from one hub window to another (cpu/labels.shifted_word).
__device__ __forceinline__ u64 shifted_word(const u64* bits, int W, int w, int k, int sh) {
    const int q = sh >> 6;  // floor division (arithmetic shift)
    const int a = k - q;
    const u64 hi = (a >= 0 && a < W) ? bits[(i64)w * W + a] : 0ull;
    const u64 lo = (a - 1 >= 0 && a - 1 < W) ? bits[(i64)w * W + a - 1] : 0ull;
    return funnel(lo, hi, (u64)(sh & 63));
}

// The window of hubs a vertex keeps (cpu/labels.window_base): the hub number of its bit 0, for
// the hubs it reaches (from the first hub of its own level on) or, `up`, those reaching it (up
// to the last hub of its level). No table (`first` nullptr: the global hubs): 0.
// A level outside the table (an appended component's, below every built one) reads the table's
// nearest end: no hubs lie above a level under 0.
struct Window {
    const int* level;
    const int* first;  // nullptr: global hubs
    int span;          // 64 W
    bool up;
    int top;           // the table's last index (its levels)
    __device__ __forceinline__ int base(int v) const {
        if (!first) return 0;
        const int at = min(max(up ? level[v] + 1 : level[v], 0), top);
        return up ? first[at] - span : first[at];
    }
};

// Append v to a frontier: out[base + (slot taken from *cnt)].
__device__ __forceinline__ void push(int* out, int base, int* cnt, int v) {
    out[base + atomicAdd(cnt, 1)] = v;
}

// Advance over the rows of items[0:count) (items == nullptr: the vertices 0..count-1), calling
// f(v, w) once per edge v -> w. Rows are binned by degree: thread-mapped, warp-mapped, or
// appended to `huge` (encoded as tag(v)) for advance_huge after the next grid.sync().
template <class F>
__device__ void advance_bins(const int* items, int count, const i64* ptr, const int* idx,
                             int* huge, int* huge_cnt, int tag_rev, F f) {
    const int lane = threadIdx.x & 31;
    const int warp = thread_rank() >> 5;
    const int nwarps = thread_count() >> 5;
    for (int base = warp * 32; base < count; base += nwarps * 32) {
        const int i = base + lane;
        int v = -1;
        i64 beg = 0, end = 0;
        if (i < count) {
            v = items ? items[i] : i;
            beg = ptr[v];
            end = ptr[v + 1];
        }
        const i64 deg = end - beg;
        if (deg >= GRID_MIN) huge[atomicAdd(huge_cnt, 1)] = tag_rev ? -v - 1 : v;
        unsigned mid = __ballot_sync(FULL_MASK, deg >= WARP_MIN && deg < GRID_MIN);
        while (mid) {
            const int leader = __ffs(mid) - 1;
            mid &= mid - 1;
            const int u = __shfl_sync(FULL_MASK, v, leader);
            const i64 b = __shfl_sync(FULL_MASK, beg, leader);
            const i64 e = __shfl_sync(FULL_MASK, end, leader);
            for (i64 k = b + lane; k < e; k += 32) f(u, idx[k]);
        }
        if (deg > 0 && deg < WARP_MIN)
            for (i64 k = beg; k < end; ++k) f(v, idx[k]);
    }
}

// The deferred rows: every thread of the grid takes a share of each huge row's edges. Entries
// encoded as negative (tag_rev) go to f_rev over the second CSR, the others to f over the first.
template <class F, class G>
__device__ void advance_huge(const int* huge, int nh, const i64* ptr, const int* idx,
                             const i64* rptr, const int* ridx, F f, G f_rev) {
    const int t = thread_rank(), T = thread_count();
    for (int h = 0; h < nh; ++h) {
        const int code = huge[h];
        if (code >= 0) {
            for (i64 k = ptr[code] + t; k < ptr[code + 1]; k += T) f(code, idx[k]);
        } else {
            const int v = -code - 1;
            for (i64 k = rptr[v] + t; k < rptr[v + 1]; k += T) f_rev(v, ridx[k]);
        }
    }
}

// Load balance of an advance, chosen by the host per launch (GpuSettings): 0 = degree-binned
// (thread / warp / grid), 1 = edge-balanced (prefix sum of the frontier's degrees, then one
// thread per edge finding its row by binary search). `scan`: scratch of n + 2 + grid entries,
// owned by the launch (nothing is shared between launches or threads of the host).
struct Balance {
    int mode;
    i64* scan;
};

// Inclusive prefix sum of one value per lane over the warp (every lane takes part).
template <class T>
__device__ T warp_inclusive_scan(T x) {
    const int lane = threadIdx.x & 31;
    for (int o = 1; o < 32; o <<= 1) {
        const T y = __shfl_up_sync(FULL_MASK, x, o);
        if (lane >= o) x += y;
    }
    return x;
}

// Named barrier `id` of `threads` threads (bar.sync with immediates: ptxas then reserves the
// barriers the kernel names, where an id in a register reserves all 16 of the block, and the
// driver fits only 4 blocks of 16 barriers on an SM).
template <int ID, int THREADS>
__device__ __forceinline__ void named_barrier() {
    asm volatile("bar.sync %0, %1;" ::"n"(ID), "n"(THREADS) : "memory");
}

// Barrier of a group of G warps in blocks of W warps: the warp itself, the whole block (G = W),
// or else the group's own named barrier (1 + its index in the block; 0 is __syncthreads'), as
// the block's groups work on different pairs and reach their barriers at different times.
template <int G, int W>
__device__ __forceinline__ void group_sync() {
    constexpr int groups = W / G;
    static_assert(G == 1 || groups <= 4, "named barriers for up to 4 groups per block");
    if (G == 1) {
        __syncwarp();
    } else if (G == W) {
        __syncthreads();
    } else {
        const int group = (int)(threadIdx.x >> 5) / G;
        if (group == 0) named_barrier<1, 32 * G>();
        else if (group == 1) named_barrier<2, 32 * G>();
        else if (groups > 2 && group == 2) named_barrier<3, 32 * G>();
        else if (groups > 3) named_barrier<4, 32 * G>();
    }
}

// Edge-balanced advance: an exclusive prefix sum of the items' degrees (per block, then across
// blocks), then edge e of the frontier goes to thread e mod T, which finds its row by binary
// search. Two grid syncs per level, no per-row imbalance at all.
template <class F>
__device__ void advance_edges(cg::grid_group& g, const int* items, int count, const i64* ptr,
                              const int* idx, i64* scan, F f) {
    __shared__ i64 warp_tot[32];
    i64* pre = scan;               // pre[i] = edges of items before i; pre[count] = total
    i64* block_tot = scan + count + 1;
    const int tile = (count + gridDim.x - 1) / gridDim.x;
    const int lo = min(count, (int)blockIdx.x * tile), hi = min(count, lo + tile);
    const int lane = threadIdx.x & 31, wid = threadIdx.x >> 5, nw = blockDim.x >> 5;
    i64 carry = 0;
    for (int c0 = lo; c0 < hi; c0 += blockDim.x) {  // block-wide scan of one chunk at a time
        const int i = c0 + threadIdx.x;
        int v = 0;
        i64 deg = 0;
        if (i < hi) { v = items ? items[i] : i; deg = ptr[v + 1] - ptr[v]; }
        const i64 x = warp_inclusive_scan(deg);
        if (lane == 31) warp_tot[wid] = x;
        __syncthreads();
        i64 before = carry;
        for (int k = 0; k < wid; ++k) before += warp_tot[k];
        if (i < hi) pre[i] = before + x - deg;
        i64 chunk = 0;
        for (int k = 0; k < nw; ++k) chunk += warp_tot[k];
        carry += chunk;
        __syncthreads();
    }
    if (threadIdx.x == 0) block_tot[blockIdx.x] = carry;
    g.sync();
    i64 offset = 0;
    for (int b = 0; b < (int)blockIdx.x; ++b) offset += block_tot[b];
    for (int i = lo + threadIdx.x; i < hi; i += blockDim.x) pre[i] += offset;
    if (blockIdx.x == gridDim.x - 1 && threadIdx.x == 0) {
        i64 total = 0;
        for (int b = 0; b < (int)gridDim.x; ++b) total += block_tot[b];
        pre[count] = total;
    }
    g.sync();
    const i64 total = pre[count];
    for (i64 e = thread_rank(); e < total; e += thread_count()) {
        int a = 0, b = count - 1;  // last i with pre[i] <= e
        while (a < b) {
            const int mid = (a + b + 1) >> 1;
            if (pre[mid] <= e) a = mid; else b = mid - 1;
        }
        const int v = items ? items[a] : a;
        f(v, idx[ptr[v] + (e - pre[a])]);
    }
    g.sync();
}

// One level of a frontier traversal: advance the items over one CSR, then the deferred huge rows.
// Counters: huge_ctr[L % 3] collects level L's huge rows; thread 0 clears the slot of L + 1.
template <class F>
__device__ void advance_level(cg::grid_group& g, const Balance& bal, int L, const int* items,
                              int count, const i64* ptr, const int* idx, int* huge, int* huge_ctr,
                              F f) {
    if (bal.mode == 1) {
        if (count > 0) advance_edges(g, items, count, ptr, idx, bal.scan, f);
        else g.sync();
        return;
    }
    if (thread_rank() == 0) huge_ctr[(L + 1) % 3] = 0;
    advance_bins(items, count, ptr, idx, huge, &huge_ctr[L % 3], 0, f);
    g.sync();
    const int nh = *((volatile int*)&huge_ctr[L % 3]);
    if (nh > 0) {
        advance_huge(huge, nh, ptr, idx, ptr, idx, f, f);
        g.sync();
    }
}
