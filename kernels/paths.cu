// Hop counts, shortest paths and reach counts (twin of grail_duckdb/kernels/cpu/paths.py).
//
// pair_hops_kernel: one warp per pair, a bidirectional breadth-first search on the original
// graph, one whole level of one side at a time (the side whose frontier has fewer edges, as the
// CPU twin: counting vertices instead sent the search into the rows of the papers cited most,
// tens of thousands of edges, 3x slower on walks' pairs of the deep citation DAG). The first
// level that reaches the other side gives the distance; the edges the level cut settles are read
// beside their rows (int16 levels), no vertex touched. With paths, the level is finished (every
// meeting vertex), the source's side is marked back from the meeting vertices layer by layer
// (over the out-rows of each layer's vertices), and the warp walks the lexicographically
// smallest shortest path, the smallest admissible successor at each step (a warp-wide minimum),
// as the CPU twin does: the same path.
//
// A warp's scratch is its own: a hash set of 64-bit entries (1 << tbits slots, at most half of
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

// Per-warp state in shared memory.
struct WarpState {
    int nnext;     // next level's size
    int nmeet;     // meeting vertices found
    int inserted;  // entries reserved in the set
    int flag;      // 2: out of scratch
    unsigned long long nedges;  // next level's edges
    i64 pre[32];   // inclusive prefix sums of the chunk's degrees
    i64 beg[32];   // the chunk's row starts
    int vtx[32];   // the chunk's vertices
};

__device__ __forceinline__ int comp_of(const int* comp, int v) { return comp ? comp[v] : v; }

// The edge of index j (< the chunk's total) of the warp's current chunk of rows, and (`row`)
// the chunk's vertex whose row holds it.
__device__ __forceinline__ i64 chunk_edge(const WarpState& ws, i64 j, int* row = nullptr) {
    int lo = 0, hi = 31;
    while (lo < hi) {
        const int mid = (lo + hi) >> 1;
        if (ws.pre[mid] > j) hi = mid; else lo = mid + 1;
    }
    if (row) *row = ws.vtx[lo];
    return ws.beg[lo] + (j - (lo ? ws.pre[lo - 1] : 0));
}

// Load a chunk of up to 32 rows (items[i0 + lane]) into ws; returns its edges.
__device__ __forceinline__ i64 load_chunk(WarpState& ws, const int* items, int n, int i0,
                                          const i64* p) {
    const int lane = threadIdx.x & 31;
    const int i = i0 + lane;
    i64 b = 0, deg = 0;
    int v = -1;
    if (i < n) {
        v = items[i];
        b = p[v];
        deg = p[v + 1] - b;
    }
    const i64 inc = warp_inclusive_scan(deg);
    ws.pre[lane] = inc;
    ws.beg[lane] = b;
    ws.vtx[lane] = v;
    __syncwarp();
    return __shfl_sync(FULL_MASK, inc, 31);
}

// One level of one side (fwd: from s over (p, x, xl); else from t over the reverse rows) into
// nxt (room for `nroom` vertices); ws.nedges sums the next level's rows.
__device__ void expand(bool fwd, int depth, const int* front, int nf, int* nxt, int nroom,
                       int* meets, const i64* p, const int* x, const short* xl, int c_end,
                       int l_end, int limit, const int* comp, const int* level, PairSet& set,
                       WarpState& ws, int qcap, int cap, bool all_meets) {
    const int lane = threadIdx.x & 31;
    const int side = fwd ? 0 : 1;
    const bool room = depth + 1 < limit;
    for (int i0 = 0; i0 < nf; i0 += 32) {
        const i64 total = load_chunk(ws, front, nf, i0, p);
        for (i64 j = lane; j < total; j += 32) {
            const i64 e = chunk_edge(ws, j);
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
                        const int k = atomicAdd(&ws.nmeet, 1);
                        if (k < qcap) meets[k] = w; else ws.flag = 2;
                    }
                }
                continue;
            }
            if (!room) continue;
            if (atomicAdd(&ws.inserted, 1) >= cap) {
                ws.flag = 2;
                continue;
            }
            if (set.insert(w, e_make(set.gen, w, side, depth + 1)) == 0ull) {
                const int k = atomicAdd(&ws.nnext, 1);
                if (k < nroom) nxt[k] = w; else ws.flag = 2;
                atomicAdd(&ws.nedges, (unsigned long long)(p[w + 1] - p[w]));
            }
        }
        __syncwarp();
        if (ws.flag == 2 || (!all_meets && ws.nmeet > 0)) break;
        __syncwarp();
    }
    __syncwarp();
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
__device__ void mark_back(int at, int d, const int* hist, const int* bounds, const i64* p,
                          const int* x, PairSet& set, WarpState& ws) {
    const int lane = threadIdx.x & 31;
    for (int j = at - 1; j >= 1; --j) {
        const int* layer = hist + bounds[j];
        const int n = bounds[j + 1] - bounds[j];
        for (int i0 = 0; i0 < n; i0 += 32) {
            const i64 total = load_chunk(ws, layer, n, i0, p);
            for (i64 k = lane; k < total; k += 32) {
                int u = 0;
                const i64 e = chunk_edge(ws, k, &u);
                unsigned slot = 0;
                if (!on_path(set.find(x[e], &slot), j + 1, at, d)) continue;
                const u64 xu = set.find(u, &slot);
                if (!(xu & E_PATH)) atomicOr(&set.slots[slot], E_PATH);
            }
            __syncwarp();
        }
    }
}

// Walk the lexicographically smallest shortest path (d edges, meeting vertices at `at`).
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

// ctr: [0] next pair to take, [1] pairs handed back, [2..3] path vertices written (i64).
extern "C" __global__ void __launch_bounds__(32 * PW_WARPS)
pair_hops_kernel(int npairs, const int* ids, const int* ps, const int* pt, const int* plim,
                 const i64* ptr, const int* idx, const short* lvl, const i64* rptr,
                 const int* ridx, const short* rlvl, const int* comp, const int* level,
                 int want_paths, int tbits, unsigned char* scratch, i64 per_warp, int warps,
                 int* hops, int* ctr, int* over, int* path_buf, i64 path_cap, i64* path_at) {
    __shared__ WarpState states[PW_WARPS];
    const int lane = threadIdx.x & 31;
    const int wib = threadIdx.x >> 5;
    const int warp = blockIdx.x * PW_WARPS + wib;
    if (warp >= warps) return;
    WarpState& ws = states[wib];
    unsigned char* mine = scratch + (i64)warp * per_warp;
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
        int q = 0;
        if (lane == 0) q = atomicAdd(&ctr[0], 1);
        q = __shfl_sync(FULL_MASK, q, 0);
        if (q >= npairs) return;
        const int pair = ids ? ids[q] : q;
        if (++gen > GEN_MAX) {  // wrap: every slot empty again
            for (unsigned h = lane; h <= set.mask; h += 32) set.slots[h] = 0ull;
            __syncwarp();
            gen = 1;
        }
        set.gen = gen;
        const int s = ps[pair], t = pt[pair], limit = plim[pair];
        if (lane == 0) {
            set.insert(s, e_make(gen, s, 0, 0));
            set.insert(t, e_make(gen, t, 1, 0));
            hist[0] = s;
            bounds[0] = 0;
            bounds[1] = 1;
            qb[0] = t;
            ws.inserted = 2;
            ws.flag = 0;
            ws.nmeet = 0;
        }
        __syncwarp();
        const int cs = comp_of(comp, s), ct = comp_of(comp, t);
        const int ls = level[cs], lt = level[ct];
        int *fb = qb, *fb2 = qb2;
        int na = 1, nb = 1, da = 0, db = 0, d = -1, at = 0, a_at = 0;
        i64 ef = ptr[s + 1] - ptr[s], eb = rptr[t + 1] - rptr[t];
        while (na > 0 && nb > 0 && da + db < limit) {
            const bool fwd = ef <= eb;
            if ((fwd ? da : db) + 1 > DIST_MAX) {  // hops past what an entry holds
                if (lane == 0) ws.flag = 2;
                __syncwarp();
                break;
            }
            if (lane == 0) {
                ws.nnext = 0;
                ws.nedges = 0ull;
            }
            __syncwarp();
            if (fwd) {
                expand(true, da, hist + a_at, na, hist + a_at + na, qcap - a_at - na, meets, ptr,
                       idx, lvl, ct, lt, limit, comp, level, set, ws, qcap, qcap,
                       want_paths != 0);
            } else {
                expand(false, db, fb, nb, fb2, qcap, meets, rptr, ridx, rlvl, cs, ls, limit, comp,
                       level, set, ws, qcap, qcap, want_paths != 0);
            }
            if (ws.flag == 2) break;
            const int nn = ws.nnext;
            if (fwd) {
                a_at += na;
                na = nn;
                ef = (i64)ws.nedges;
                if (lane == 0) bounds[da + 2] = a_at + nn;
            } else {
                int* tmp = fb; fb = fb2; fb2 = tmp;
                nb = nn;
                eb = (i64)ws.nedges;
            }
            __syncwarp();
            if (ws.nmeet > 0) {
                d = da + db + 1;
                at = fwd ? da + 1 : da;
                break;
            }
            if (fwd) ++da; else ++db;
        }
        bool handed_back = ws.flag == 2;
        i64 pos = 0;
        if (!handed_back && want_paths && d >= 0) {
            if (lane == 0) pos = (i64)atomicAdd((unsigned long long*)(ctr + 2), (unsigned long long)(d + 1));
            pos = __shfl_sync(FULL_MASK, pos, 0);
            if (pos + d + 1 > path_cap) {
                handed_back = true;
            } else {
                mark_back(at, d, hist, bounds, ptr, idx, set, ws);
                walk(s, d, at, ptr, idx, set, path_buf + pos);
            }
        }
        if (lane == 0) {
            if (handed_back) {
                over[atomicAdd(&ctr[1], 1)] = pair;
            } else {
                hops[pair] = d;
                if (want_paths) path_at[pair] = pos;
            }
        }
        __syncwarp();
    }
}

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
// four to an unsigned word; a CAS loop keeps the largest).
extern "C" __global__ void sketch_init_kernel(int n, const int* comp, int p, int words,
                                              unsigned* regs) {
    for (int v = blockIdx.x * blockDim.x + threadIdx.x; v < n; v += gridDim.x * blockDim.x) {
        const u64 h = mix64((u64)v);
        const int j = (int)(h >> (64 - p));
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
