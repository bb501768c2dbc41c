// Queries: the label tests every query kernel shares (LabelView), and the label-pruned
// multi-query bitmask search (GRAIL GPU paper, Section 5, Algorithm 7), twin of bitmask_search in
// grail_duckdb/kernels/cpu/search.py: its level-synchronous frontier form, one persistent
// cooperative kernel for all the passes of a call. classify.cu (the cuts) follows this file.
#include "common.cuh"


struct LabelView {
    const int* level;
    const int* inner;
    const int* outer;
    const int* tree;  // the two spanning-tree intervals, 4 ints per vertex (shared.TREE_COLUMNS)
    int d;
    const u64* down;  // hub bits: hubs each vertex reaches (hw words per vertex)
    const u64* up;    // hub bits: hubs that reach each vertex
    int hw;

    // The negative cuts: false when u certainly does not reach t (u != t). The predicates are
    // the shared ones (grail_duckdb/kernels/shared.py), as in the CPU twin.
    __device__ __forceinline__ bool may_reach(int u, int t) const {
        if (level_excludes(level[u], level[t])) return false;
        for (int j = 0; j < d; ++j)
            if (label_excludes(inner[(i64)u * d + j], outer[(i64)u * d + j],
                               inner[(i64)t * d + j], outer[(i64)t * d + j]))
                return false;
        for (int k = 0; k < hw; ++k)
            if (hubs_exclude(down[(i64)u * hw + k], up[(i64)u * hw + k], down[(i64)t * hw + k],
                             up[(i64)t * hw + k]))
                return false;
        return true;
    }
    // The positive cut of the two spanning trees, one 16-byte load per vertex: t lies in u's
    // subtree of the tree of parents, or u in t's subtree of the tree of chosen children.
    __device__ __forceinline__ bool tree_reaches(int u, int t) const {
        const int4 a = reinterpret_cast<const int4*>(tree)[u];
        const int4 b = reinterpret_cast<const int4*>(tree)[t];
        return tree_contains(a.x, a.y, b.y) || tree_contains(b.z, b.w, a.w);
    }
    // The positive hub cut: u reaches a hub that reaches t.
    __device__ __forceinline__ bool hub_reaches(int u, int t) const {
        for (int k = 0; k < hw; ++k)
            if (hubs_meet(down[(i64)u * hw + k], up[(i64)t * hw + k])) return true;
        return false;
    }
};

// All passes of one call: pass b answers queries [b * 64W, (b + 1) * 64W) with one bit each in
// W words per vertex. seen[v]: bits that reached v; pend0 / pend1[v]: bits v expands at the
// current / next level (ping-pong); done[W]: answered bits (dropped everywhere). Vertices whose
// words changed are listed in `touched` and cleared after the pass.
// ctr[0..2]: frontier counts, ctr[3..5]: huge-row counts, ctr[6]: touched count.
extern "C" __global__ void search_kernel(int n, const i64* ptr, const int* idx, const int* level,
                                         const int* inner, const int* outer, const int* tree,
                                         int d, const u64* down, const u64* up, int hw,
                                         int nq, const int* cs, const int* ct, int W, int prune,
                                         bool* ans, u64* seen, u64* pend0, u64* pend1,
                                         u64* done, int* stamp, int* tmark, int* q0, int* q1,
                                         int* touched, int* huge, int* ctr,
        int balance, i64* scan) {
    const Balance bal{balance, scan};
    cg::grid_group g = cg::this_grid();
    const int t = thread_rank(), T = thread_count();
    const LabelView lab{level, inner, outer, tree, d, down, up, hw};
    const int per = 64 * W;
    int* cnt = ctr;
    int* tcnt = &ctr[6];
    int gl = 0;  // global level number: frontier stamps and counter slots stay unique
    for (int base = 0, pass = 1; base < nq; base += per, ++pass) {
        const int nb = min(per, nq - base);
        if (t < W) done[t] = 0ull;
        if (t == 0)
            for (int k = 0; k < 7; ++k) ctr[k] = 0;  // counters: every earlier read is done
        g.sync();
        auto touch = [&](int v) {
            if (atomicExch(&tmark[v], pass) != pass) touched[atomicAdd(tcnt, 1)] = v;
        };
        for (int i = t; i < nb; i += T) {  // seed: bit i starts at its source
            const int u = cs[base + i];
            const u64 bit = 1ull << (i & 63);
            atomicOr(&seen[(i64)u * W + (i >> 6)], bit);
            atomicOr(&pend0[(i64)u * W + (i >> 6)], bit);
            touch(u);
            if (atomicExch(&stamp[u], gl + 1) != gl + 1) push(q0, 0, &cnt[gl % 3], u);
        }
        g.sync();
        int count = *((volatile int*)&cnt[gl % 3]);
        for (int L = 0; count > 0; ++L, ++gl) {
            const int* in = (L & 1) ? q1 : q0;
            int* out = (L & 1) ? q0 : q1;
            u64* pin = (L & 1) ? pend1 : pend0;
            u64* pout = (L & 1) ? pend0 : pend1;
            int* out_cnt = &cnt[(gl + 1) % 3];
            if (t == 0) cnt[(gl + 2) % 3] = 0;
            const int mark = gl + 2;
            auto expand = [&](int v, int w) {
                for (int wd = 0; wd < W; ++wd) {
                    u64 bits = pin[(i64)v * W + wd] & ~*((volatile u64*)&done[wd]);
                    if (!bits) continue;
                    u64* sw = &seen[(i64)w * W + wd];
                    bits &= ~*((volatile u64*)sw);
                    if (!bits) continue;
                    bits &= ~atomicOr(sw, bits);
                    if (!bits) continue;
                    touch(w);
                    u64 keep = 0ull;
                    while (bits) {
                        const u64 low = bits & (~bits + 1ull);
                        bits ^= low;
                        const int q = base + wd * 64 + (__ffsll((long long)low) - 1);
                        const int tq = ct[q];
                        if (w == tq || (prune && (lab.tree_reaches(w, tq) || lab.hub_reaches(w, tq)))) {
                            ans[q] = true;
                            atomicOr(&done[wd], low);
                        } else if (!prune || lab.may_reach(w, tq)) {
                            keep |= low;
                        }
                    }
                    if (keep) {
                        atomicOr(&pout[(i64)w * W + wd], keep);
                        if (atomicExch(&stamp[w], mark) != mark) push(out, 0, out_cnt, w);
                    }
                }
            };
            advance_level(g, bal, gl, in, count, ptr, idx, huge, ctr + 3, expand);
            for (int i = t; i < count * W; i += T) pin[(i64)in[i / W] * W + (i % W)] = 0ull;
            int answered = 0;
            for (int wd = 0; wd < W; ++wd) answered += __popcll(*((volatile u64*)&done[wd]));
            count = answered >= nb ? 0 : *((volatile int*)out_cnt);
            g.sync();
        }
        ++gl;
        const int nt = *((volatile int*)tcnt);
        for (int i = t; i < nt * W; i += T) {
            const i64 k = (i64)touched[i / W] * W + (i % W);
            seen[k] = 0ull;
            pend0[k] = 0ull;
            pend1[k] = 0ull;
        }
        g.sync();
    }
}
