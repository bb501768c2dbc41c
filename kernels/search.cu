// Queries: the label tests every query kernel shares (LabelView), and the label-pruned
// multi-query bitmask search (GRAIL GPU paper, Section 5, Algorithm 7), twin of bitmask_search in
// grail_duckdb/kernels/cpu/search.py: its level-synchronous frontier form, one persistent
// cooperative kernel for all the passes of a call. classify.cu (the cuts) follows this file.
#include "common.cuh"


// What LabelView::test says of a pair.
#define TEST_EXCLUDES 0
#define TEST_REACHES 1
#define TEST_OPEN 2

// The labels of each component as one record of `stride` ints (grail_duckdb/kernels/records.py):
// the level and the d GRAIL intervals first, the two tree intervals (one int4) from int tree_at,
// the hub words (hw per side) from int hub_at. A tested vertex costs the sectors of its record
// that the tests reach: one when the level or the first intervals settle it, at most
// stride / 8.
struct LabelView {
    const int* rec;
    const int* levels;  // the levels alone, 4 bytes per vertex: the first cut of a query pair
    int stride, tree_at, hub_at, d, hw;
    // the window hubs (grail_duckdb/engine/labels.window_hubs), read by the classification
    // only: ww words per side and vertex, wfirst[L] the window hubs above level L; wfirst
    // nullptr when the labels have none
    const u64* wdown;
    const u64* wup;
    const int* wfirst;
    int ww;
    int wtop;  // wfirst's last index (its levels)

    __device__ __forceinline__ const int* at(int v) const { return rec + (i64)v * stride; }
    __device__ __forceinline__ const u64* hubs(const int* r) const {
        return reinterpret_cast<const u64*>(r + hub_at);  // down[0:hw], then up[0:hw]
    }

    // The negative cuts of the GRAIL intervals and of the hub words: true when one of them
    // shows that the vertex of record a does not reach that of record b. The predicates are
    // the shared ones (grail_duckdb/kernels/shared.py), as in the CPU twin.
    __device__ __forceinline__ bool intervals_exclude(const int* a, const int* b) const {
        for (int j = 0; j < d; ++j)
            if (label_excludes(a[RECORD_LABELS + 2 * j], a[RECORD_LABELS + 2 * j + 1],
                               b[RECORD_LABELS + 2 * j], b[RECORD_LABELS + 2 * j + 1]))
                return true;
        return false;
    }
    __device__ __forceinline__ bool hub_words_exclude(const int* a, const int* b) const {
        const u64* ha = hubs(a);
        const u64* hb = hubs(b);
        for (int k = 0; k < hw; ++k)
            if (hubs_exclude(ha[k], ha[hw + k], hb[k], hb[hw + k])) return true;
        return false;
    }
    // Every negative cut: false when u certainly does not reach t (u != t).
    __device__ __forceinline__ bool may_reach(int u, int t) const {
        const int* a = at(u);
        const int* b = at(t);
        return !level_excludes(a[RECORD_LEVEL], b[RECORD_LEVEL]) && !intervals_exclude(a, b) &&
               !hub_words_exclude(a, b);
    }
    // The positive cut of the two spanning trees, one 16-byte load per vertex: t lies in u's
    // subtree of the tree of parents, or u in t's subtree of the tree of chosen children.
    __device__ __forceinline__ bool tree_reaches(int u, int t) const {
        const int4 a = *reinterpret_cast<const int4*>(at(u) + tree_at);
        const int4 b = *reinterpret_cast<const int4*>(at(t) + tree_at);
        return tree_contains(a.x, a.y, b.y) || tree_contains(b.z, b.w, a.w);
    }
    // The positive hub cut: u reaches a hub that reaches t.
    __device__ __forceinline__ bool hub_reaches(int u, int t) const {
        const u64* ha = hubs(at(u));
        const u64* hb = hubs(at(t));
        for (int k = 0; k < hw; ++k)
            if (hubs_meet(ha[k], hb[hw + k])) return true;
        return false;
    }
    // The positive cut of the window hubs (cpu/search._window_reaches): u's down window, rebased
    // into t's up window, meets it.
    __device__ __forceinline__ bool window_reaches(int u, int t) const {
        if (!wfirst) return false;
        const int span = 64 * ww;
        const int sh = Window{levels, wfirst, span, false, wtop}.base(u) -
                       Window{levels, wfirst, span, true, wtop}.base(t);
        if (sh <= -span || sh >= span) return false;
        for (int k = 0; k < ww; ++k)
            if (shifted_word(wdown, ww, u, k, sh) & wup[(i64)t * ww + k]) return true;
        return false;
    }
    // Every cut of one pair, in the order of the record's fields (the level, the GRAIL
    // intervals, the trees, the hubs): TEST_REACHES (u == t included), TEST_EXCLUDES or
    // TEST_OPEN. The order changes no answer: a positive and a negative cut never both hold.
    __device__ __forceinline__ int test(int u, int t) const {
        if (u == t) return TEST_REACHES;
        const int* a = at(u);
        const int* b = at(t);
        if (level_excludes(a[RECORD_LEVEL], b[RECORD_LEVEL]) || intervals_exclude(a, b))
            return TEST_EXCLUDES;
        if (tree_reaches(u, t) || hub_reaches(u, t)) return TEST_REACHES;
        return hub_words_exclude(a, b) ? TEST_EXCLUDES : TEST_OPEN;
    }
};
// The label arguments of every query kernel, and the view made of them.
#define LABEL_PARAMS \
    const int *rec, const int *levels, int stride, int tree_at, int hub_at, int d, int hw, \
    const u64 *wdown, const u64 *wup, const int *wfirst, int ww, int wtop
#define LABEL_VIEW \
    LabelView{rec, levels, stride, tree_at, hub_at, d, hw, wdown, wup, wfirst, ww, wtop}

// All passes of one call: pass b answers queries [b * 64W, (b + 1) * 64W) with one bit each in
// W words per vertex. seen[v]: bits that reached v; pend0 / pend1[v]: bits v expands at the
// current / next level (ping-pong); done[W]: answered bits (dropped everywhere). Vertices whose
// words changed are listed in `touched` and cleared after the pass.
// ctr[0..2]: frontier counts, ctr[3..5]: huge-row counts, ctr[6]: touched count.
extern "C" __global__ void search_kernel(int n, const i64* ptr, const int* idx, LABEL_PARAMS,
                                         int nq, const int* cs, const int* ct, int W, int prune,
                                         bool* ans, u64* seen, u64* pend0, u64* pend1,
                                         u64* done, int* stamp, int* tmark, int* q0, int* q1,
                                         int* touched, int* huge, int* ctr,
        int balance, i64* scan) {
    const Balance bal{balance, scan};
    cg::grid_group g = cg::this_grid();
    const int t = thread_rank(), T = thread_count();
    const LabelView lab = LABEL_VIEW;
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
                        const int r = w == tq ? TEST_REACHES : prune ? lab.test(w, tq) : TEST_OPEN;
                        if (r == TEST_REACHES) {
                            ans[q] = true;
                            atomicOr(&done[wd], low);
                        } else if (r == TEST_OPEN) {
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
            for (i64 i = t; i < (i64)count * W; i += T) pin[(i64)in[i / W] * W + (i % W)] = 0ull;
            int answered = 0;
            for (int wd = 0; wd < W; ++wd) answered += __popcll(*((volatile u64*)&done[wd]));
            count = answered >= nb ? 0 : *((volatile int*)out_cnt);
            g.sync();
        }
        ++gl;
        const int nt = *((volatile int*)tcnt);
        for (i64 i = t; i < (i64)nt * W; i += T) {  // n * W may pass 2^31
            const i64 k = (i64)touched[i / W] * W + (i % W);
            seen[k] = 0ull;
            pend0[k] = 0ull;
            pend1[k] = 0ull;
        }
        g.sync();
    }
}
