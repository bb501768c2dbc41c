// GRAIL labels: the four breadth-first passes (GRAIL GPU paper, Section 4), level-synchronous,
// each pass one persistent cooperative kernel over the topological levels. Twins of
// topological_levels, tree_parents, tree_children, subtree_sizes, post_orders and
// interval_bounds in grail_duckdb/kernels/cpu/labels.py.
#include "common.cuh"

// Kahn's sweep by levels: a vertex enters level L + 1 when its last in-neighbour (level L) is
// expanded, so level = longest path from a root. order lists the vertices level by level and
// offs[L] is where level L starts in it (offs[levels] = vertices seen). ctr[6] = levels,
// ctr[7] = vertices seen.
extern "C" __global__ void levels_kernel(int n, const i64* fptr, const int* fidx,
                                         const i64* rptr, int* pending, int* level, int* order,
                                         int* offs, int* huge, int* ctr,
        int balance, i64* scan) {
    const Balance bal{balance, scan};
    cg::grid_group g = cg::this_grid();
    const int t = thread_rank(), T = thread_count();
    int* cnt = ctr;
    for (int v = t; v < n; v += T) {
        const int p = (int)(rptr[v + 1] - rptr[v]);
        pending[v] = p;
        level[v] = 0;
        if (p == 0) push(order, 0, &cnt[0], v);
    }
    g.sync();
    int lo = 0, hi = *((volatile int*)&cnt[0]);
    int L = 0;
    for (; hi > lo; ++L) {
        if (t == 0) offs[L] = lo;
        int* out_cnt = &cnt[(L + 1) % 3];
        if (t == 0) cnt[(L + 2) % 3] = 0;
        const int base = hi, next = L + 1;
        auto release = [&](int v, int w) {
            if (atomicSub(&pending[w], 1) == 1) {
                level[w] = next;
                push(order, base, out_cnt, w);
            }
        };
        advance_level(g, bal, L, order + lo, hi - lo, fptr, fidx, huge, ctr + 3, release);
        lo = hi;
        hi = base + *((volatile int*)out_cnt);
    }
    if (t == 0) {
        offs[L] = hi;
        ctr[6] = L;
        ctr[7] = hi;
    }
}

// Step 1: tree parent = smallest-id in-neighbour one level above (INT_MAX until set; the
// caller turns what is left into -1). One advance over every reverse row.
extern "C" __global__ void parents_kernel(int n, const i64* rptr, const int* ridx,
                                          const int* level, int* parent, int* huge, int* ctr,
        int balance, i64* scan) {
    const Balance bal{balance, scan};
    cg::grid_group g = cg::this_grid();
    auto adopt = [&](int v, int u) {
        if (level[u] == level[v] - 1) atomicMin(&parent[v], u);
    };
    advance_level(g, bal, 0, nullptr, n, rptr, ridx, huge, ctr + 3, adopt);
}

// The mirror of step 1 (cpu/labels.tree_children): each vertex's link in the tree of chosen
// children is its out-neighbour of smallest level, ties the smallest id: the smallest key
// level << 32 | id over the row (best starts at ~0; the caller turns what is left into -1).
extern "C" __global__ void children_kernel(int n, const i64* fptr, const int* fidx,
                                           const int* level, u64* best, int* huge, int* ctr,
        int balance, i64* scan) {
    const Balance bal{balance, scan};
    cg::grid_group g = cg::this_grid();
    auto adopt = [&](int v, int w) {
        atomicMin(&best[v], ((u64)(unsigned)level[w] << 32) | (u64)(unsigned)w);
    };
    advance_level(g, bal, 0, nullptr, n, fptr, fidx, huge, ctr + 3, adopt);
}

// Step 2: subtree sizes bottom-up, one level at a time (size starts at 1).
extern "C" __global__ void sizes_kernel(int levels, const int* order, const int* offs,
                                        const int* parent, int* size) {
    cg::grid_group g = cg::this_grid();
    const int t = thread_rank(), T = thread_count();
    for (int L = levels - 1; L >= 1; --L) {
        for (int i = offs[L] + t; i < offs[L + 1]; i += T) {
            const int v = order[i];
            const int p = parent[v];
            if (p >= 0) atomicAdd(&size[p], size[v]);
        }
        g.sync();
    }
}

// Label j's pseudo-random vertex order (shared.order_params, cpu/labels.permuted_block): blocks of
// ORDER_BLOCK consecutive ids in a cycle-walked bijective order, ids xored inside a block.
// inv[blk] = rank of block blk in that order.
extern "C" __global__ void block_rank_kernel(i64 n_blocks, u64 mask, u64 a1, u64 c, u64 a2,
                                             u64 shift, i64* inv) {
    for (i64 b = thread_rank(); b < n_blocks; b += thread_count()) {
        u64 x = (u64)b;
        do x = permute_step(x, mask, a1, c, a2, shift);
        while (x >= (u64)n_blocks);
        inv[x] = b;
    }
}

// Sort key of vertex v among its siblings in label j: (parent + 1) in the high 32 bits, v's
// rank in label j's vertex order in the low ones; sorting by it groups every parent's children
// in exactly the order in which cpu/labels.post_orders visits them.
extern "C" __global__ void sibling_keys_kernel(int n, const int* parent, const i64* inv,
                                               u64 xr, u64* key) {
    for (int v = thread_rank(); v < n; v += thread_count()) {
        const u64 rank = (u64)inv[v / ORDER_BLOCK] * ORDER_BLOCK + ((u64)(v % ORDER_BLOCK) ^ xr);
        key[v] = ((u64)(unsigned)(parent[v] + 1) << 32) | rank;
    }
}

// Step 3: post ranks top-down for all d labels: post[v, j] = start + size[v] where start is v's
// exclusive sibling prefix excl[v, j] plus its parent's start (= post[p, j] - size[p]).
extern "C" __global__ void post_kernel(int levels, int d, const int* order, const int* offs,
                                       const int* parent, const int* size, const int* excl,
                                       int* post) {
    cg::grid_group g = cg::this_grid();
    const int t = thread_rank(), T = thread_count();
    for (int L = 0; L < levels; ++L) {
        const int lo = offs[L], hi = offs[L + 1];
        for (i64 k = (i64)lo * d + t; k < (i64)hi * d; k += T) {  // n * d may pass 2^31
            const int v = order[k / d], j = (int)(k % d);
            const int p = parent[v];
            const int start = excl[(i64)v * d + j] + (p >= 0 ? post[(i64)p * d + j] - size[p] : 0);
            post[(i64)v * d + j] = start + size[v];
        }
        g.sync();
    }
}

// Step 4: [inner, outer] = min / max post rank over v and all its DAG descendants, bottom-up by
// levels (inner, outer start as copies of post). Each vertex is owned by one warp, which pulls
// from its children with a warp reduction and writes once: no atomics.
extern "C" __global__ void bounds_kernel(int levels, int d, const i64* fptr, const int* fidx,
                                         const int* order, const int* offs, int* inner,
                                         int* outer, int* huge, int* ctr) {
    cg::grid_group g = cg::this_grid();
    const int lane = threadIdx.x & 31;
    const int warp = thread_rank() >> 5, nwarps = thread_count() >> 5;
    for (int L = levels - 1; L >= 0; --L) {
        for (int i = offs[L] + warp; i < offs[L + 1]; i += nwarps) {
            const int v = order[i];
            const i64 b = fptr[v], e = fptr[v + 1];
            if (b == e) continue;
            if (e - b >= GRID_MIN) {  // a huge row: the whole grid shares it below
                if (lane == 0) huge[atomicAdd(&ctr[3 + L % 3], 1)] = v;
                continue;
            }
            for (int j = 0; j < d; ++j) {
                int lo = inner[(i64)v * d + j], hi = outer[(i64)v * d + j];
                for (i64 k = b + lane; k < e; k += 32) {
                    const i64 w = fidx[k];
                    lo = min(lo, inner[w * d + j]);
                    hi = max(hi, outer[w * d + j]);
                }
                for (int o = 16; o > 0; o >>= 1) {
                    lo = min(lo, __shfl_xor_sync(FULL_MASK, lo, o));
                    hi = max(hi, __shfl_xor_sync(FULL_MASK, hi, o));
                }
                if (lane == 0) {
                    inner[(i64)v * d + j] = lo;
                    outer[(i64)v * d + j] = hi;
                }
            }
        }
        if (thread_rank() == 0) ctr[3 + (L + 2) % 3] = 0;  // the slot of level L - 1
        g.sync();
        const int nh = *((volatile int*)&ctr[3 + L % 3]);
        if (nh > 0) {
            auto pull = [&](int v, int w) {
                for (int j = 0; j < d; ++j) {
                    atomicMin(&inner[(i64)v * d + j], inner[(i64)w * d + j]);
                    atomicMax(&outer[(i64)v * d + j], outer[(i64)w * d + j]);
                }
            };
            advance_huge(huge, nh, fptr, fidx, fptr, fidx, pull, pull);
            g.sync();
        }
    }
}

// Hub bits (cpu/labels.hub_bits): down[v] = hubs v reaches, bottom-up pulling from every DAG child;
// up[v] = hubs reaching v, top-down pulling from every DAG parent. W words per vertex; each
// vertex is owned by one warp (OR-reduction over its row, one write). With `first` (the window
// hubs, numbered by level), each vertex keeps the window of 64 W hubs that Window::base says
// (common.cuh), and a neighbour's row is rebased into it; without, every base is 0.

__device__ __forceinline__ void pull_or(int v, const i64* ptr, const int* idx, int W, u64* bits,
                                        const Window& win, int* huge, int* hcnt) {
    const int lane = threadIdx.x & 31;
    const i64 b = ptr[v], e = ptr[v + 1];
    if (b == e) return;
    if (e - b >= GRID_MIN) {  // a huge row: the whole grid shares it (pull_or_huge)
        if (lane == 0) huge[atomicAdd(hcnt, 1)] = v;
        return;
    }
    const int base = win.base(v);
    for (int k = 0; k < W; ++k) {
        u64 acc = 0ull;
        for (i64 x = b + lane; x < e; x += 32) {
            const int w = idx[x];
            const int sh = win.base(w) - base;
            if (sh > -win.span && sh < win.span) acc |= shifted_word(bits, W, w, k, sh);
        }
        for (int o = 16; o > 0; o >>= 1) acc |= __shfl_xor_sync(FULL_MASK, acc, o);
        if (lane == 0) bits[(i64)v * W + k] |= acc;
    }
}

// The deferred huge rows of one level, every thread of the grid taking a share (atomicOr).
__device__ void pull_or_huge(cg::grid_group& g, int step, const i64* ptr, const int* idx, int W,
                             u64* bits, const Window& win, int* huge, int* ctr) {
    if (thread_rank() == 0) ctr[3 + (step + 2) % 3] = 0;  // the slot of the previous step
    g.sync();
    const int nh = *((volatile int*)&ctr[3 + step % 3]);
    if (nh == 0) return;
    auto pull = [&](int v, int u) {
        const int sh = win.base(u) - win.base(v);
        if (sh <= -win.span || sh >= win.span) return;
        for (int k = 0; k < W; ++k) {
            const u64 x = shifted_word(bits, W, u, k, sh);
            if (x & ~bits[(i64)v * W + k]) atomicOr(&bits[(i64)v * W + k], x);
        }
    };
    advance_huge(huge, nh, ptr, idx, ptr, idx, pull, pull);
    g.sync();
}

extern "C" __global__ void hubs_kernel(int n, int levels, int W, const i64* fptr,
                                       const int* fidx, const i64* rptr, const int* ridx,
                                       const int* order, const int* offs, const int* hub_of,
                                       const int* level, const int* first,
                                       u64* down, u64* up, int* huge, int* ctr) {
    cg::grid_group g = cg::this_grid();
    const int warp = thread_rank() >> 5, nwarps = thread_count() >> 5;
    const Window wdown{level, first, 64 * W, false, levels},
        wup{level, first, 64 * W, true, levels};
    for (int v = thread_rank(); v < n; v += thread_count()) {
        const int h = hub_of[v];
        if (h < 0) continue;
        const int hd = h - wdown.base(v), hu = h - wup.base(v);
        if (hd >= 0 && hd < 64 * W) down[(i64)v * W + (hd >> 6)] |= 1ull << (hd & 63);
        if (hu >= 0 && hu < 64 * W) up[(i64)v * W + (hu >> 6)] |= 1ull << (hu & 63);
    }
    g.sync();
    int step = 0;
    for (int L = levels - 1; L >= 0; --L, ++step) {
        for (int i = offs[L] + warp; i < offs[L + 1]; i += nwarps)
            pull_or(order[i], fptr, fidx, W, down, wdown, huge, &ctr[3 + step % 3]);
        pull_or_huge(g, step, fptr, fidx, W, down, wdown, huge, ctr);
    }
    for (int L = 0; L < levels; ++L, ++step) {
        for (int i = offs[L] + warp; i < offs[L + 1]; i += nwarps)
            pull_or(order[i], rptr, ridx, W, up, wup, huge, &ctr[3 + step % 3]);
        pull_or_huge(g, step, rptr, ridx, W, up, wup, huge, ctr);
    }
}
