// Hop counts, shortest paths and reach counts (twin of grail_duckdb/kernels/cpu/paths.py).
//
// pair_hops_g*_kernel: one group of G warps per pair (one warp in the first round, where most
// searches are small; more in the later ones, which take the few large searches the first hands
// back, each a critical path of its own), a bidirectional breadth-first search on the original
// graph, one whole level of one side at a time (the side whose frontier has fewer edges, as the
// CPU twin: counting vertices instead sent the search into the rows of the papers cited most,
// tens of thousands of edges, 3x slower on walks' pairs of the deep citation DAG). The group
// shares the edges of each chunk of 32 G frontier rows (a scan of their degrees). The first
// level that reaches the other side gives the distance; the edges the level cut settles are read
// beside their rows (int16 levels), no vertex touched. With paths, the level is finished (every
// meeting vertex), the source's side is marked back from the meeting vertices layer by layer
// (over the out-rows of each layer's vertices), and the group's first warp walks the
// lexicographically smallest shortest path, the smallest admissible successor at each step (a
// warp-wide minimum), as the CPU twin does: the same path.
//
// A group's scratch is its own: a hash set of 64-bit entries (1 << tbits slots, at most half of
// them used), the source's side level after level (`qcap` vertices, and where each level
// starts), the target side's frontier and next level and the meeting vertices (`qcap` each).
// An entry packs the vertex, its side, its hops from its side's end, two flags
// and the pair's generation (entries of another generation are empty slots: the set is never
// cleared between pairs, only when the generation wraps). A pair that would outgrow its scratch
// (or hops past DIST_MAX, or the path buffer) is handed back (overflow list) for the host's next
// round with more scratch.
//
// count_level_kernel / sketch_*_kernel: one level of the reach counts' sweep over the condensed
// DAG, children first (the host launches the levels in order).
#include "common.cuh"

#define PW_WARPS 8
// entry layout: bits 0-30 vertex + 1, 31 side, 32 meeting vertex, 33 on a shortest path,
// 34-51 hops (18 bits), 52-63 generation (12 bits, 0 = never written)
#define E_SIDE_BIT 31
#define E_MEET (1ull << 32)
#define E_PATH (1ull << 33)
#define DIST_SHIFT 34
#define DIST_MAX 0x3FFFF
#define GEN_SHIFT 52
#define GEN_MAX 0xFFF

__device__ __forceinline__ u64 e_make(unsigned gen, int v, int side, int dist) {
    return ((u64)gen << GEN_SHIFT) | ((u64)dist << DIST_SHIFT) | ((u64)side << E_SIDE_BIT) |
           (u64)(unsigned)(v + 1);
}
__device__ __forceinline__ unsigned e_gen(u64 x) { return (unsigned)(x >> GEN_SHIFT); }
__device__ __forceinline__ int e_vertex(u64 x) { return (int)(x & 0x7FFFFFFFull) - 1; }
__device__ __forceinline__ int e_side(u64 x) { return (int)((x >> E_SIDE_BIT) & 1ull); }
__device__ __forceinline__ int e_dist(u64 x) { return (int)((x >> DIST_SHIFT) & DIST_MAX); }

// The set of one warp: linear probing, entries of the current generation only.
struct PairSet {
    u64* slots;
    unsigned mask;
    unsigned gen;

    __device__ __forceinline__ unsigned home(int v) const { return ((unsigned)v * 2654435761u) & mask; }

    // The entry of v (0 when absent) and its slot.
    __device__ u64 find(int v, unsigned* slot) const {
        for (unsigned h = home(v);; h = (h + 1) & mask) {
            const u64 x = *((volatile u64*)&slots[h]);
            if (e_gen(x) != gen) return 0ull;
            if (e_vertex(x) == v) {
                *slot = h;
                return x;
            }
        }
    }

    // Insert `entry` for v unless v is there: returns 0 when inserted, else v's entry.
    __device__ u64 insert(int v, u64 entry) {
        for (unsigned h = home(v);; h = (h + 1) & mask) {
            u64 x = *((volatile u64*)&slots[h]);
            if (e_gen(x) != gen) {
                const u64 old = atomicCAS(&slots[h], x, entry);
                if (old == x) return 0ull;
                x = old;  // taken meanwhile (by this generation)
            }
            if (e_vertex(x) == v) return x;
        }
    }
};

// Per-group state in shared memory (a group: G warps on one pair, PW_WARPS / G per block).
template <int G>
struct GroupState {
    int nnext;     // next level's size
    int nmeet;     // meeting vertices found
    int inserted;  // entries reserved in the set
    int flag;      // 2: out of scratch
    int q;         // the pair taken (broadcast from the group's first thread)
    i64 pos;       // where its path goes
    unsigned long long nedges;  // next level's edges
    i64 wsum[G];     // each warp's sum of the chunk's degrees
    i64 pre[32 * G]; // inclusive prefix sums of the chunk's degrees
    i64 beg[32 * G]; // the chunk's row starts
    int vtx[32 * G]; // the chunk's vertices
};

template <int G>
__device__ __forceinline__ void gsync() { group_sync<G, PW_WARPS>(); }

// The group's own thread index (0 .. 32 G - 1).
template <int G>
__device__ __forceinline__ int group_thread() { return (int)(threadIdx.x % (32 * G)); }

__device__ __forceinline__ int comp_of(const int* comp, int v) { return comp ? comp[v] : v; }

// The edge of index j (< the chunk's total) of the group's current chunk of rows, and (`row`)
// the chunk's vertex whose row holds it.
template <int G>
__device__ __forceinline__ i64 chunk_edge(const GroupState<G>& gs, i64 j, int* row = nullptr) {
    int lo = 0, hi = 32 * G - 1;
    while (lo < hi) {
        const int mid = (lo + hi) >> 1;
        if (gs.pre[mid] > j) hi = mid; else lo = mid + 1;
    }
    if (row) *row = gs.vtx[lo];
    return gs.beg[lo] + (j - (lo ? gs.pre[lo - 1] : 0));
}

// Load a chunk of up to 32 G rows (items[i0 + group thread]) into gs: a scan of their degrees
// over the whole group, so that its threads share the chunk's edges however they fall among
// its rows (a hub's thousands); returns its edges.
template <int G>
__device__ __forceinline__ i64 load_chunk(GroupState<G>& gs, const int* items, int n, int i0,
                                          const i64* p) {
    const int gt = group_thread<G>();
    const int i = i0 + gt;
    i64 b = 0, deg = 0;
    int v = -1;
    if (i < n) {
        v = items[i];
        b = p[v];
        deg = p[v + 1] - b;
    }
    i64 inc = warp_inclusive_scan(deg);
    if (G > 1) {
        const int gw = gt >> 5;
        if ((gt & 31) == 31) gs.wsum[gw] = inc;
        gsync<G>();
        for (int k = 0; k < gw; ++k) inc += gs.wsum[k];
    }
    gs.pre[gt] = inc;
    gs.beg[gt] = b;
    gs.vtx[gt] = v;
    gsync<G>();
    return gs.pre[32 * G - 1];
}

// One level of one side (fwd: from s over (p, x, xl); else from t over the reverse rows) into
// nxt (room for `nroom` vertices); gs.nedges sums the next level's rows.
template <int G>
__device__ void expand(bool fwd, int depth, const int* front, int nf, int* nxt, int nroom,
                       int* meets, const i64* p, const int* x, const short* xl, int c_end,
                       int l_end, int limit, const int* comp, const int* level, PairSet& set,
                       GroupState<G>& gs, int qcap, int cap, bool all_meets) {
    const int gt = group_thread<G>();
    const int side = fwd ? 0 : 1;
    const bool room = depth + 1 < limit;
    for (int i0 = 0; i0 < nf; i0 += 32 * G) {
        const i64 total = load_chunk<G>(gs, front, nf, i0, p);
        for (i64 j = gt; j < total; j += 32 * G) {
            const i64 e = chunk_edge<G>(gs, j);
            int lw = xl[e];
            int w = -1;
            if (lw == EDGE_LEVEL_CAP) {
                w = x[e];
                lw = level[comp_of(comp, w)];
            }
            if (fwd ? lw > l_end : lw < l_end) continue;
            if (w < 0) w = x[e];
            if (lw == l_end && comp_of(comp, w) != c_end) continue;
            unsigned slot = 0;
            const u64 found = set.find(w, &slot);
            if (found) {
                if (e_side(found) != side) {
                    const u64 old = atomicOr(&set.slots[slot], E_MEET);
                    if (!(old & E_MEET)) {
                        const int k = atomicAdd(&gs.nmeet, 1);
                        if (k < qcap) meets[k] = w; else gs.flag = 2;
                    }
                }
                continue;
            }
            if (!room) continue;
            if (atomicAdd(&gs.inserted, 1) >= cap) {
                gs.flag = 2;
                continue;
            }
            if (set.insert(w, e_make(set.gen, w, side, depth + 1)) == 0ull) {
                const int k = atomicAdd(&gs.nnext, 1);
                if (k < nroom) nxt[k] = w; else gs.flag = 2;
                atomicAdd(&gs.nedges, (unsigned long long)(p[w + 1] - p[w]));
            }
        }
        gsync<G>();
        const bool stop = gs.flag == 2 || (!all_meets && gs.nmeet > 0);
        gsync<G>();
        if (stop) break;
    }
}

// Whether an entry's vertex lies at position j of a shortest path of d edges whose meeting
// vertices are at position `at` (the source's side marked from `at` down to j already).
__device__ __forceinline__ bool on_path(u64 x, int j, int at, int d) {
    if (!x) return false;
    if (j < at) return e_side(x) == 0 && (x & E_PATH) && e_dist(x) == j;
    if (j == at) return (x & E_MEET) != 0ull;
    return e_side(x) == 1 && e_dist(x) == d - j;
}

// Mark the source's side of every shortest path, layer by layer back from the meeting
// vertices: a vertex of layer j (hist[bounds[j]:bounds[j + 1]]) with a successor on a shortest
// path at position j + 1.
template <int G>
__device__ void mark_back(int at, int d, const int* hist, const int* bounds, const i64* p,
                          const int* x, PairSet& set, GroupState<G>& gs) {
    const int gt = group_thread<G>();
    for (int j = at - 1; j >= 1; --j) {
        const int* layer = hist + bounds[j];
        const int n = bounds[j + 1] - bounds[j];
        for (int i0 = 0; i0 < n; i0 += 32 * G) {
            const i64 total = load_chunk<G>(gs, layer, n, i0, p);
            for (i64 k = gt; k < total; k += 32 * G) {
                int u = 0;
                const i64 e = chunk_edge<G>(gs, k, &u);
                unsigned slot = 0;
                if (!on_path(set.find(x[e], &slot), j + 1, at, d)) continue;
                const u64 xu = set.find(u, &slot);
                if (!(xu & E_PATH)) atomicOr(&set.slots[slot], E_PATH);
            }
            gsync<G>();
        }
    }
}

// Walk the lexicographically smallest shortest path (d edges, meeting vertices at `at`): one
// warp, the smallest admissible successor at each step a warp-wide minimum.
__device__ void walk(int s, int d, int at, const i64* p, const int* x, PairSet& set, int* out) {
    const int lane = threadIdx.x & 31;
    if (lane == 0) out[0] = s;
    int v = s;
    for (int i = 0; i < d; ++i) {
        int best = 0x7FFFFFFF;
        for (i64 e = p[v] + lane; e < p[v + 1]; e += 32) {
            const int w = x[e];
            unsigned slot = 0;
            if (w < best && on_path(set.find(w, &slot), i + 1, at, d)) best = w;
        }
        for (int o = 16; o > 0; o >>= 1) best = min(best, __shfl_xor_sync(FULL_MASK, best, o));
        if (lane == 0) out[i + 1] = best;
        v = best;
    }
    __syncwarp();
}

// One round of the pair search: groups of G warps take pairs ids[k] (nullptr: k) from ctr[0].
// ctr: [0] next pair to take, [1] pairs handed back, [2..3] path vertices written (i64).
template <int G>
__device__ void pair_hops_round(int npairs, const int* ids, const int* ps, const int* pt,
                                const int* plim, const i64* ptr, const int* idx,
                                const short* lvl, const i64* rptr, const int* ridx,
                                const short* rlvl, const int* comp, const int* level,
                                int want_paths, int tbits, unsigned char* scratch, i64 per_group,
                                int groups, int* hops, int* ctr, int* over, int* path_buf,
                                i64 path_cap, i64* path_at, GroupState<G>* states) {
    const int gt = group_thread<G>();
    const int group = thread_rank() / (32 * G);
    if (group >= groups) return;  // whole groups leave together
    GroupState<G>& gs = states[(threadIdx.x >> 5) / G];
    unsigned char* mine = scratch + (i64)group * per_group;
    PairSet set;
    set.slots = (u64*)mine;
    set.mask = (1u << tbits) - 1u;
    const int qcap = 1 << (tbits - 1);
    int* hist = (int*)(mine + (8ll << tbits));  // the source's side, level after level
    int* bounds = hist + qcap;                  // where each of its levels starts (qcap + 2)
    int* qb = bounds + qcap + 2;
    int* qb2 = qb + qcap;
    int* meets = qb2 + qcap;
    unsigned gen = 0;
    while (true) {
        if (gt == 0) gs.q = atomicAdd(&ctr[0], 1);
        gsync<G>();
        const int q = gs.q;
        if (q >= npairs) return;
        const int pair = ids ? ids[q] : q;
        if (++gen > GEN_MAX) {  // wrap: every slot empty again
            for (unsigned h = gt; h <= set.mask; h += 32 * G) set.slots[h] = 0ull;
            gsync<G>();
            gen = 1;
        }
        set.gen = gen;
        const int s = ps[pair], t = pt[pair], limit = plim[pair];
        if (gt == 0) {
            set.insert(s, e_make(gen, s, 0, 0));
            set.insert(t, e_make(gen, t, 1, 0));
            hist[0] = s;
            bounds[0] = 0;
            bounds[1] = 1;
            qb[0] = t;
            gs.inserted = 2;
            gs.flag = 0;
            gs.nmeet = 0;
        }
        gsync<G>();
        const int cs = comp_of(comp, s), ct = comp_of(comp, t);
        const int ls = level[cs], lt = level[ct];
        int *fb = qb, *fb2 = qb2;
        int na = 1, nb = 1, da = 0, db = 0, d = -1, at = 0, a_at = 0;
        i64 ef = ptr[s + 1] - ptr[s], eb = rptr[t + 1] - rptr[t];
        bool handed_back = false;
        while (na > 0 && nb > 0 && da + db < limit) {
            const bool fwd = ef <= eb;
            if ((fwd ? da : db) + 1 > DIST_MAX) {  // hops past what an entry holds
                handed_back = true;
                break;
            }
            if (gt == 0) {
                gs.nnext = 0;
                gs.nedges = 0ull;
            }
            gsync<G>();
            if (fwd) {
                expand<G>(true, da, hist + a_at, na, hist + a_at + na, qcap - a_at - na, meets,
                          ptr, idx, lvl, ct, lt, limit, comp, level, set, gs, qcap, qcap,
                          want_paths != 0);
            } else {
                expand<G>(false, db, fb, nb, fb2, qcap, meets, rptr, ridx, rlvl, cs, ls, limit,
                          comp, level, set, gs, qcap, qcap, want_paths != 0);
            }
            const int nn = gs.nnext, nmeet = gs.nmeet;
            const i64 ne = (i64)gs.nedges;
            handed_back = gs.flag == 2;
            gsync<G>();
            if (handed_back) break;
            if (fwd) {
                if (gt == 0) bounds[da + 2] = a_at + na + nn;
                a_at += na;
                na = nn;
                ef = ne;
            } else {
                int* tmp = fb; fb = fb2; fb2 = tmp;
                nb = nn;
                eb = ne;
            }
            if (nmeet > 0) {
                d = da + db + 1;
                at = fwd ? da + 1 : da;
                break;
            }
            if (fwd) ++da; else ++db;
        }
        if (!handed_back && want_paths && d >= 0) {
            if (gt == 0) {
                gs.pos = (i64)atomicAdd((unsigned long long*)(ctr + 2),
                                        (unsigned long long)(d + 1));
            }
            gsync<G>();
            const i64 pos = gs.pos;
            if (pos + d + 1 > path_cap) {
                handed_back = true;
            } else {
                mark_back<G>(at, d, hist, bounds, ptr, idx, set, gs);
                if (gt < 32) walk(s, d, at, ptr, idx, set, path_buf + pos);
                if (gt == 0) path_at[pair] = pos;
            }
        }
        if (gt == 0) {
            if (handed_back) over[atomicAdd(&ctr[1], 1)] = pair;
            else hops[pair] = d;
        }
        gsync<G>();
    }
}

#define PAIR_HOPS_PARAMS                                                                     \
    int npairs, const int *ids, const int *ps, const int *pt, const int *plim,               \
        const i64 *ptr, const int *idx, const short *lvl, const i64 *rptr, const int *ridx,  \
        const short *rlvl, const int *comp, const int *level, int want_paths, int tbits,     \
        unsigned char *scratch, i64 per_group, int groups, int *hops, int *ctr, int *over,    \
        int *path_buf, i64 path_cap, i64 *path_at

// A round with groups of G warps per pair (pair_hops_g1_kernel ... pair_hops_g8_kernel): one
// warp for the many small searches of the first round, more for the few large ones it hands
// back (one warp alone walks a search of tens of thousands of vertices for tens of ms).
#define PAIR_HOPS_KERNEL(G)                                                                  \
    extern "C" __global__ void __launch_bounds__(32 * PW_WARPS)                              \
        pair_hops_g##G##_kernel(PAIR_HOPS_PARAMS) {                                          \
        __shared__ GroupState<G> states[PW_WARPS / G];                                       \
        pair_hops_round<G>(npairs, ids, ps, pt, plim, ptr, idx, lvl, rptr, ridx, rlvl, comp, \
                           level, want_paths, tbits, scratch, per_group, groups, hops, ctr,  \
                           over, path_buf, path_cap, path_at, states);                       \
    }
PAIR_HOPS_KERNEL(1)
PAIR_HOPS_KERNEL(2)
PAIR_HOPS_KERNEL(4)
PAIR_HOPS_KERNEL(8)

// One level of the exact counts: positions lo..hi-1 of `order` (children first), each row of
// `words` words (thread per word): its own bit (member row < members) and its children's;
// counts[c] += the vertices of the members its bits hold (unit: bit set where the member is
// one vertex; heavy[start + member]: the member's vertices).
extern "C" __global__ void count_level_kernel(int lo, int hi, int start, int members,
                                              const int* order, const int* pos_of,
                                              const i64* ptr, const int* idx, int words,
                                              u64* bits, const u64* unit,
                                              const long long* heavy, long long* counts) {
    const i64 n = (i64)(hi - lo) * words;
    for (i64 t = (i64)blockIdx.x * blockDim.x + threadIdx.x; t < n;
         t += (i64)gridDim.x * blockDim.x) {
        const int p = lo + (int)(t / words), k = (int)(t % words);
        const int c = order[p], row = p - start;
        u64 x = (row < members && (row >> 6) == k) ? (1ull << (row & 63)) : 0ull;
        for (i64 e = ptr[c]; e < ptr[c + 1]; ++e) {
            const int q = pos_of[idx[e]] - start;
            if (q >= 0) x |= bits[(i64)q * words + k];
        }
        bits[(i64)row * words + k] = x;
        if (x) {
            long long total = __popcll(x & unit[k]);
            u64 rest = x & ~unit[k];
            while (rest) {
                const int b = __ffsll((long long)rest) - 1;
                total += heavy[start + 64 * k + b];
                rest &= rest - 1;
            }
            atomicAdd((unsigned long long*)&counts[c], (unsigned long long)total);
        }
    }
}

// The HyperLogLog register of each vertex v (mix64(v)) into its component's row (bytes packed
// four to an unsigned word; a CAS loop keeps the largest): the registers first .. first +
// 4 * words - 1 of the 2^p only (a slice; the others' vertices are skipped).
extern "C" __global__ void sketch_init_kernel(int n, const int* comp, int p, int first, int words,
                                              unsigned* regs) {
    for (int v = blockIdx.x * blockDim.x + threadIdx.x; v < n; v += gridDim.x * blockDim.x) {
        const u64 h = mix64((u64)v);
        const int j = (int)(h >> (64 - p)) - first;
        if (j < 0 || j >= 4 * words) continue;
        const int cap = 64 - p;
        const int rank = min(__clzll((long long)(h << p)) + 1, cap);
        unsigned* word = &regs[(i64)comp_of(comp, v) * words + (j >> 2)];
        const int shift = 8 * (j & 3);
        unsigned old = *word;
        while ((int)((old >> shift) & 0xFFu) < rank) {
            const unsigned want = (old & ~(0xFFu << shift)) | ((unsigned)rank << shift);
            const unsigned seen = atomicCAS(word, old, want);
            if (seen == old) break;
            old = seen;
        }
    }
}

// One level of the sketches' sweep: each row of lo..hi-1 (children first) takes the bytewise
// maximum of its children's rows.
extern "C" __global__ void sketch_level_kernel(int lo, int hi, const int* order, const i64* ptr,
                                               const int* idx, int words, unsigned* regs) {
    const i64 n = (i64)(hi - lo) * words;
    for (i64 t = (i64)blockIdx.x * blockDim.x + threadIdx.x; t < n;
         t += (i64)gridDim.x * blockDim.x) {
        const int c = order[lo + (int)(t / words)], k = (int)(t % words);
        unsigned x = regs[(i64)c * words + k];
        for (i64 e = ptr[c]; e < ptr[c + 1]; ++e) x = __vmaxu4(x, regs[(i64)idx[e] * words + k]);
        regs[(i64)c * words + k] = x;
    }
}

// Per row: s1 = sum of 2^(64 - p - r) over its nonzero registers r, zeros = its empty ones.
extern "C" __global__ void sketch_sums_kernel(int n, int p, int words, const unsigned* regs,
                                              u64* s1, int* zeros) {
    for (int c = blockIdx.x * blockDim.x + threadIdx.x; c < n; c += gridDim.x * blockDim.x) {
        u64 s = 0ull;
        int z = 0;
        for (int k = 0; k < words; ++k) {
            const unsigned w = regs[(i64)c * words + k];
            for (int b = 0; b < 4; ++b) {
                const int r = (w >> (8 * b)) & 0xFF;
                if (r == 0) ++z; else s += 1ull << (64 - p - r);
            }
        }
        s1[c] = s;
        zeros[c] = z;
    }
}
