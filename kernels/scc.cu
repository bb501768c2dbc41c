// SCC condensation steps (Multistep, the manycore paper): trim, reach within a colour, and
// max-colour propagation. Each is one persistent cooperative kernel that runs every level of its
// frontier traversal; twins of trim / reach_within_colour / propagate_max_colour in grail_duckdb/kernels/cpu/graph.py.
#include "common.cuh"

// Level-synchronous peel: a live vertex whose live in- or out-degree drops to zero is removed
// (a singleton component). state[v] != 0 marks removed vertices; queue collects them in order.
// ctr[0..2]: frontier counts, ctr[3..5]: huge-row counts, ctr[6]: result (vertices removed).
extern "C" __global__ void trim_kernel(int n, int all_alive, const i64* fptr, const int* fidx,
                                       const i64* rptr, const int* ridx, bool* alive,
                                       int* indeg, int* outdeg, int* state, int* queue,
                                       int* huge, int* ctr,
        int balance, i64* scan) {
    const Balance bal{balance, scan};
    cg::grid_group g = cg::this_grid();
    const int t = thread_rank(), T = thread_count();
    for (int v = t; v < n; v += T) {
        state[v] = alive[v] ? 0 : 1;
        if (all_alive) {
            indeg[v] = (int)(rptr[v + 1] - rptr[v]);
            outdeg[v] = (int)(fptr[v + 1] - fptr[v]);
        }
    }
    g.sync();
    int step = 0;
    if (!all_alive) {  // live degrees: count edges between live vertices (indeg/outdeg zeroed)
        auto count = [&](int v, int w) {
            if (!state[v] && !state[w]) {
                atomicAdd(&outdeg[v], 1);
                atomicAdd(&indeg[w], 1);
            }
        };
        advance_level(g, bal, step, nullptr, n, fptr, fidx, huge, ctr + 3, count);
        ++step;
    }
    int* cnt = ctr;
    for (int v = t; v < n; v += T)
        if (!state[v] && (indeg[v] == 0 || outdeg[v] == 0)) {
            state[v] = 1;
            alive[v] = false;
            push(queue, 0, &cnt[0], v);
        }
    if (t == 0) { cnt[1] = 0; cnt[2] = 0; }
    g.sync();
    int lo = 0, hi = *((volatile int*)&cnt[0]);
    for (int L = 0; hi > lo; ++L, ++step) {
        int* out_cnt = &cnt[(L + 1) % 3];
        int* hcnt = &ctr[3 + step % 3];
        if (t == 0) { cnt[(L + 2) % 3] = 0; ctr[3 + (step + 1) % 3] = 0; }
        const int base = hi;
        auto lose_in = [&](int v, int w) {
            if (!state[w] && atomicSub(&indeg[w], 1) == 1 && atomicExch(&state[w], 1) == 0) {
                alive[w] = false;
                push(queue, base, out_cnt, w);
            }
        };
        auto lose_out = [&](int v, int u) {
            if (!state[u] && atomicSub(&outdeg[u], 1) == 1 && atomicExch(&state[u], 1) == 0) {
                alive[u] = false;
                push(queue, base, out_cnt, u);
            }
        };
        advance_bins(queue + lo, hi - lo, fptr, fidx, huge, hcnt, 0, lose_in);
        advance_bins(queue + lo, hi - lo, rptr, ridx, huge, hcnt, 1, lose_out);
        g.sync();
        const int nh = *((volatile int*)hcnt);
        if (nh > 0) {
            advance_huge(huge, nh, fptr, fidx, rptr, ridx, lose_in, lose_out);
            g.sync();
        }
        lo = hi;
        hi = base + *((volatile int*)out_cnt);
    }
    if (t == 0) ctr[6] = hi;
}

// Vertices reachable from a seed through vertices of the seed's colour (colour < 0: dead).
// state[v] = 1 once reached; queue holds the reached vertices level by level.
extern "C" __global__ void reach_kernel(int n, const i64* ptr, const int* idx,
                                        const bool* seeds, const int* colour, int* state,
                                        int* queue, int* huge, int* ctr,
        int balance, i64* scan) {
    const Balance bal{balance, scan};
    cg::grid_group g = cg::this_grid();
    const int t = thread_rank(), T = thread_count();
    int* cnt = ctr;
    for (int v = t; v < n; v += T)
        if (seeds[v] && colour[v] >= 0) {
            state[v] = 1;
            push(queue, 0, &cnt[0], v);
        }
    g.sync();
    int lo = 0, hi = *((volatile int*)&cnt[0]);
    for (int L = 0; hi > lo; ++L) {
        int* out_cnt = &cnt[(L + 1) % 3];
        if (t == 0) cnt[(L + 2) % 3] = 0;
        const int base = hi;
        auto visit = [&](int v, int w) {
            if (colour[w] == colour[v] && !state[w] && atomicExch(&state[w], 1) == 0)
                push(queue, base, out_cnt, w);
        };
        advance_level(g, bal, L, queue + lo, hi - lo, ptr, idx, huge, ctr + 3, visit);
        lo = hi;
        hi = base + *((volatile int*)out_cnt);
    }
}

// Fixpoint of colour[w] = max(colour[w], colour[v]) over edges between live vertices. The
// frontier holds the vertices whose colour rose in the last level (ping-pong buffers q0 / q1,
// stamp[w] = level + 1 keeps each vertex once per level).
extern "C" __global__ void propagate_kernel(int n, const i64* ptr, const int* idx, int* colour,
                                            int* stamp, int* q0, int* q1, int* huge, int* ctr,
        int balance, i64* scan) {
    const Balance bal{balance, scan};
    cg::grid_group g = cg::this_grid();
    const int t = thread_rank(), T = thread_count();
    int* cnt = ctr;
    for (int v = t; v < n; v += T)
        if (colour[v] >= 0) push(q0, 0, &cnt[0], v);
    g.sync();
    int count = *((volatile int*)&cnt[0]);
    for (int L = 0; count > 0; ++L) {
        int* in = (L & 1) ? q1 : q0;
        int* out = (L & 1) ? q0 : q1;
        int* out_cnt = &cnt[(L + 1) % 3];
        if (t == 0) cnt[(L + 2) % 3] = 0;
        const int mark = L + 1;
        auto raise = [&](int v, int w) {
            const int c = *((volatile int*)&colour[v]);
            const int cw = *((volatile int*)&colour[w]);
            if (cw >= 0 && cw < c && atomicMax(&colour[w], c) < c &&
                atomicExch(&stamp[w], mark) != mark)
                push(out, 0, out_cnt, w);
        };
        advance_level(g, bal, L, in, count, ptr, idx, huge, ctr + 3, raise);
        count = *((volatile int*)out_cnt);
    }
}
