// Queries, first stage: one fused pass over a batch of key pairs (key -> vertex id ->
// component -> every cut -> answer bit and status count), then the bounded per-pair search for
// the pairs no cut settled. Twins of grail_duckdb/kernels/cpu/classify.py. Both kernels are
// queued back to back on the caller's stream; the host reads nothing until the counts and the
// answer bits come back in one copy.
#include "common.cuh"

// How query keys become vertex ids (LOOKUP_* codes of grail_duckdb/kernels/shared.py).
struct KeyLookup {
    int mode;
    i64 offset;       // LOOKUP_DENSE: key of table[0]; LOOKUP_RANGE: key of id 0
    i64 size;         // entries of table (dense) or of sorted (sorted keys), keys of the range
    const int* table; // LOOKUP_DENSE: id of key offset + i, or -1
    const i64* sorted;// LOOKUP_SORTED: the keys of ids 0..size-1, ascending

    // The id of a key, or a negative number for a key that is not a vertex. key - offset is
    // exact whenever key >= offset (computed unsigned; a wrapped difference is >= 2^63 > size).
    __device__ __forceinline__ int id(i64 key) const {
        if (mode == LOOKUP_IDS) return (int)key;
        if (mode == LOOKUP_RANGE) {
            const u64 j = (u64)key - (u64)offset;
            return (key >= offset && j < (u64)size) ? (int)j : -1;
        }
        if (mode == LOOKUP_DENSE) {
            const u64 j = (u64)key - (u64)offset;
            return (key >= offset && j < (u64)size) ? table[j] : -1;
        }
        i64 lo = 0, hi = size;  // lower bound of key in sorted
        while (lo < hi) {
            const i64 mid = (lo + hi) >> 1;
            if (sorted[mid] < key) lo = mid + 1; else hi = mid;
        }
        return (lo < size && sorted[lo] == key) ? (int)lo : -1;
    }
};

// Status code of one valid pair (cpu/classify._classify): unknown keys (equal: SAME_KEY), same
// vertex, same component, then with prune the level cut, the positive tree cut, the negative
// label and hub tests, the positive hub cuts (the window hubs' counted as HUB_CUT); UNDECIDED
// when none settles it. u and t: its components.
__device__ __forceinline__ int classify_pair(const KeyLookup& look, i64 ka, i64 kb,
                                             const int* comp, const LabelView& lab, int prune,
                                             int& u, int& t) {
    const int a = look.id(ka), b = look.id(kb);
    if (a < 0 || b < 0) return ka == kb ? SAME_KEY : UNKNOWN;
    if (a == b) return SAME_VERTEX;
    u = comp ? comp[a] : a;
    t = comp ? comp[b] : b;
    if (u == t) return SAME_COMPONENT;
    if (!prune) return UNDECIDED;
    // the level cut settles most random pairs: read from the levels alone, which a small
    // graph's L2 holds, rather than from the records
    if (level_excludes(lab.levels[u], lab.levels[t])) return LEVEL_CUT;
    // the tree cut, then the negative tests: a reachable mix settles in the first, and most
    // pairs a random mix leaves are unreachable (on the host each is a pass over the open
    // pairs, the tree's the cheapest; one record read here either way)
    if (lab.tree_reaches(u, t)) return TREE_CUT;
    if (!lab.may_reach(u, t)) return LABEL_CUT;
    if (lab.hub_reaches(u, t)) return HUB_CUT;
    if (lab.window_reaches(u, t)) return HUB_CUT;
    return UNDECIDED;
}

// Append the (row, u, t) of the lanes where `want` holds to a list whose length is *len: one
// atomic per warp.
__device__ __forceinline__ void warp_append(bool want, int row, int u, int t, int* len,
                                            int* rows, int* us, int* ts) {
    const unsigned mask = __ballot_sync(FULL_MASK, want);
    if (!mask) return;
    const int lane = threadIdx.x & 31;
    const int leader = __ffs(mask) - 1;
    int base = 0;
    if (lane == leader) base = atomicAdd(len, __popc(mask));
    base = __shfl_sync(FULL_MASK, base, leader);
    if (want) {
        const int slot = base + __popc(mask & ((1u << lane) - 1u));
        rows[slot] = row;
        us[slot] = u;
        ts[slot] = t;
    }
}

// One batch of nq pairs: keys[0:nq) sources, keys[nq:2nq) targets, int64 (wide) or int32 (the
// host's narrow staging: key - offset, looked up with offset 0); valid: nullptr, or one byte
// per pair, 0 for a NULL pair. Writes bit q of bits (one 32-bit word per warp of 32 pairs) for
// every pair settled true, adds each status count to counts[code], and appends the undecided
// pairs (prune) to und_* (length counts[UNDECIDED]) or, without prune, to def_* (length
// counts[DEFERRED]).
extern "C" __global__ void classify_kernel(int nq, const void* keys, int wide,
                                           const unsigned char* valid,
                                           int mode, i64 offset, i64 size, const int* table,
                                           const i64* sorted, const int* comp, LABEL_PARAMS,
                                           int prune,
                                           unsigned* bits, int* counts, int* und_row,
                                           int* und_u, int* und_t, int* def_row, int* def_u,
                                           int* def_t) {
    __shared__ int hist[N_STATUS];
    for (int i = threadIdx.x; i < N_STATUS; i += blockDim.x) hist[i] = 0;
    __syncthreads();
    const KeyLookup look{mode, offset, size, table, sorted};
    const LabelView lab = LABEL_VIEW;
    const int lane = threadIdx.x & 31;
    const int nwarps = thread_count() >> 5;
    for (int base = (thread_rank() >> 5) * 32; base < nq; base += nwarps * 32) {
        const int q = base + lane;
        int code = -1, u = 0, t = 0;
        if (q < nq) {
            if (valid && !valid[q]) code = NULL_PAIR;
            else {
                const i64 ka = wide ? ((const i64*)keys)[q] : ((const int*)keys)[q];
                const i64 kb = wide ? ((const i64*)keys)[nq + q] : ((const int*)keys)[nq + q];
                code = classify_pair(look, ka, kb, comp, lab, prune, u, t);
            }
        }
        const unsigned word = __ballot_sync(FULL_MASK, code >= 0 && ((SETTLED_TRUE_MASK >> code) & 1u));
        if (lane == 0) bits[base >> 5] = word;
        const bool open = code == UNDECIDED;
        if (prune) warp_append(open, q, u, t, &counts[UNDECIDED], und_row, und_u, und_t);
        else warp_append(open, q, u, t, &counts[DEFERRED], def_row, def_u, def_t);
        if (code >= 0 && !open) atomicAdd(&hist[code], 1);
    }
    __syncthreads();
    for (int i = threadIdx.x; i < N_STATUS; i += blockDim.x)
        if (hist[i]) atomicAdd(&counts[i], hist[i]);
}

// The bounded search of one pair u -> t that no cut settled (cpu/classify._probe): a
// depth-first walk from u that stops at the first vertex meeting t (t itself, either tree cut,
// or a hub reaching t), enters only children that pass the negative cuts for t, and gives up
// (DEFERRED) after `budget` edges or when its stack of PROBE_STACK entries is full.
__device__ int probe_pair(int u, int t, const i64* ptr, const int* idx, const LabelView& lab,
                          int budget) {
    if (budget <= 0) return DEFERRED;
    int stack[PROBE_STACK];
    int top = 1, steps = 0;
    stack[0] = u;
    while (top > 0) {
        const int v = stack[--top];
        const i64 end = ptr[v + 1];
        for (i64 e = ptr[v]; e < end; ++e) {
            if (steps == budget) return DEFERRED;
            ++steps;
            const int w = idx[e];
            const int r = lab.test(w, t);
            if (r == TEST_REACHES) return PROBE_REACHES;
            if (r == TEST_OPEN) {
                if (top == PROBE_STACK) return DEFERRED;
                stack[top++] = w;
            }
        }
    }
    return PROBE_EXCLUDES;
}

// One thread per undecided pair of classify_kernel's list (its length: counts[UNDECIDED]):
// the bounded search; true answers set their bit, the pairs it gives up on are appended to
// def_* (length counts[DEFERRED]) for the multi-query search.
extern "C" __global__ void probe_kernel(const int* und_row, const int* und_u, const int* und_t,
                                        const i64* ptr, const int* idx, LABEL_PARAMS,
                                        int budget, unsigned* bits, int* counts,
                                        int* def_row, int* def_u, int* def_t) {
    __shared__ int hist[2];
    if (threadIdx.x < 2) hist[threadIdx.x] = 0;
    __syncthreads();
    const LabelView lab = LABEL_VIEW;
    const int n = counts[UNDECIDED];  // written by classify_kernel, earlier on this stream
    for (int i = thread_rank(); i < n; i += thread_count()) {
        const int row = und_row[i], u = und_u[i], t = und_t[i];
        const int code = probe_pair(u, t, ptr, idx, lab, budget);
        if (code == PROBE_REACHES) atomicOr(&bits[row >> 5], 1u << (row & 31));
        if (code == DEFERRED) {
            const int slot = atomicAdd(&counts[DEFERRED], 1);
            def_row[slot] = row;
            def_u[slot] = u;
            def_t[slot] = t;
        } else {
            atomicAdd(&hist[code - PROBE_REACHES], 1);
        }
    }
    __syncthreads();
    if (threadIdx.x < 2 && hist[threadIdx.x]) atomicAdd(&counts[PROBE_REACHES + threadIdx.x], hist[threadIdx.x]);
}
