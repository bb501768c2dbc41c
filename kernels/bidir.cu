// Queries, last stage: the exact search of the pairs that the cuts and the bounded search left,
// one group of 1, 2, 4 or 8 warps per pair (more for the large pairs of later rounds), from
// both ends (twin of grail_duckdb/kernels/cpu/bidir.py). The forward side grows from s over
// children that may still reach t, the backward side from t over parents that s may still
// reach; each step expands the side whose frontier has fewer vertices, the whole group
// sharing its edges. (The CPU twin weighs the frontiers by their edges: on the device the
// degree of each queued vertex is one more random read, and counting vertices made 10M random
// pairs on the 250M-edge citation graph 11% faster, H100.) s reaches t as soon as a vertex is
// on both sides or meets a positive cut; it does not once either side runs dry. No grid
// barrier: each group takes pairs from a counter.
//
// A group's scratch is bounded and owned by it: two frontier queues of `cap` vertices and a set
// of the vertices on either side, a hash table of 4 * cap slots (mode 0) or two bits per vertex
// (mode 1, dense, with cap = n: never too small, as each side queues a vertex at most once). A
// pair that would overflow its group's queues is handed back (overflow list) and searched again
// by the host's next round with larger scratch.
//
// The level cut settles most of the edges a search crosses (50-63% on the deep citation DAGs),
// and every edge tested against the labels is a random 128-byte read of its vertex's record.
// So each edge's far end has its level beside it, int16 in arrays parallel to the CSRs'
// indices (Kernels.edge_levels, saturated at EDGE_LEVEL_CAP): read with the edge, coalesced,
// it settles those edges without touching a record (nullptr: no such arrays, every edge reads
// its record).
//
// Filter, then advance (Gunrock's two operators, within a warp): a warp waits for its slowest
// lane, so an edge settled from its level saves a record read only when all 32 lanes' edges
// are. With `pack`, each warp keeps the edges that survive the level cut in its own 64 slots
// of shared memory (a ballot gives each survivor its slot) and tests them against their
// records 32 at a time, the last few when the side's step ends: about 40% of the record-reading
// warp steps of testing the edges where they lie (a CPU replay of the first round's steps on
// the deep citation DAGs).
#include "common.cuh"

#define SIDE_FWD 0u
#define SIDE_BWD 1u
#define WARPS_PER_BLOCK 8
#define SPILL (32 * WARPS_PER_BLOCK)

// The set of vertices reached by either side. insert(): 0 = new on this side, 1 = already on
// this side, 2 = already on the other side (the two searches meet). remove(): clears a vertex
// inserted during this pair (every entry of the table belongs to the current pair, so zeroing
// them all leaves it empty: no tombstones needed).
struct Reached {
    int mode;
    unsigned* table; // mode 0: slots of (v + 1) | side << 31 (v + 1 < 2^31), 0 = empty
    unsigned mask;   // mode 0: slots - 1 (a power of two)
    unsigned* bits;  // mode 1: two bits per vertex, 16 vertices per word

    __device__ __forceinline__ static unsigned slot_of(int v) { return (unsigned)v * 2654435761u; }

    __device__ int insert(int v, unsigned side) {
        if (mode == 1) {
            const unsigned shift = 2u * (unsigned)(v & 15);
            const unsigned old = atomicOr(&bits[v >> 4], (1u << side) << shift) >> shift;
            if (old & (1u << side)) return 1;
            return (old & (1u << (side ^ 1u))) ? 2 : 0;
        }
        const unsigned id = (unsigned)v + 1u, key = id | (side << 31);
        for (unsigned h = slot_of(v) & mask;; h = (h + 1) & mask) {
            const unsigned old = atomicCAS(&table[h], 0u, key);
            if (old == 0u) return 0;
            if ((old & 0x7fffffffu) == id) return (old >> 31) == side ? 1 : 2;
        }
    }

    __device__ void remove(int v) {
        if (mode == 1) {
            bits[v >> 4] = 0u;  // the whole word: its other vertices are being cleared too
            return;
        }
        const unsigned id = (unsigned)v + 1u;
        for (unsigned h = slot_of(v) & mask;; h = (h + 1) & mask) {
            if ((table[h] & 0x7fffffffu) == id) {
                table[h] = 0u;
                return;
            }
        }
    }
};

// Per-warp state of one step, in shared memory.
struct StepState {
    int tail;           // next free queue slot of the side being expanded
    int flag;           // 0 = go on, 1 = met (s reaches t), 2 = a queue overflowed
    int nspill;         // vertices inserted into `seen` that found no queue slot (overflow)
    int pair;           // the pair the group works on (broadcast from its first thread)
    int spill[SPILL];   // (each warp stops after the round of 32 edges that overflowed)
};

// Shared-memory slots per warp for the survivors of the level cut (`pack`): up to 31 waiting
// and the 32 edges of one step.
#define PACK_SLOTS 64

// One side's step reaches w, the far end of an edge the level cut left: w's cuts against the
// other end (the pair w stands for: (w, t) forward, (s, w) backward), then, still open, w
// joins this side (the sides meet when the other one holds it) and its queue.
__device__ __forceinline__ void visit(int w, bool fwd, int s, int t, const LabelView& lab,
                                      Reached& seen, unsigned side, int* q, int cap,
                                      StepState* st) {
    const int cut = fwd ? lab.test(w, t) : lab.test(s, w);
    if (cut == TEST_REACHES) {
        atomicMax(&st->flag, 1);
    } else if (cut == TEST_OPEN) {
        const int r = seen.insert(w, side);
        if (r == 2) {
            atomicMax(&st->flag, 1);
        } else if (r == 0) {
            const int slot = atomicAdd(&st->tail, 1);
            if (slot < cap) {
                q[slot] = w;
            } else {  // in `seen` but in no queue: cleared from the spill list
                const int k = atomicAdd(&st->nspill, 1);
                if (k < SPILL) st->spill[k] = w;
                atomicMax(&st->flag, 2);
            }
        }
    }
}

// One pair on one group of G warps: 1 (s reaches t), 0 (it does not) or 2 (the queues
// overflowed). Every thread of the group calls it with the same arguments; `pk` is the warp's
// PACK_SLOTS ints of shared memory (used with `pack`).
template <int G>
__device__ int bidir_pair(int s, int t, const i64* ptr, const int* idx, const i64* rptr,
                          const int* ridx, const short* lvl, const short* rlvl,
                          const LabelView& lab, Reached& seen, int* qf, int* qb, int cap,
                          StepState* st, bool pack, int* pk) {
    const int lane = threadIdx.x & 31;
    const int gw = (threadIdx.x >> 5) % G;  // warp within the group
    const int gt = gw * 32 + lane;          // thread within the group
    if (gt == 0) {
        seen.insert(s, SIDE_FWD);
        seen.insert(t, SIDE_BWD);
        qf[0] = s;
        qb[0] = t;
        st->nspill = 0;
    }
    group_sync<G, WARPS_PER_BLOCK>();
    int hf = 0, tf = 1, hb = 0, tb = 1;
    int result = 0;
    const int level_s = lab.levels[s], level_t = lab.levels[t];
    while (hf < tf && hb < tb) {
        const bool fwd = tf - hf <= tb - hb;
        const int head = fwd ? hf : hb, end = fwd ? tf : tb;
        int* q = fwd ? qf : qb;
        const i64* p = fwd ? ptr : rptr;
        const int* x = fwd ? idx : ridx;
        const short* xl = fwd ? lvl : rlvl;
        const int end_w = fwd ? t : s;  // the vertex that ends this side's search
        const unsigned side = fwd ? SIDE_FWD : SIDE_BWD;
        if (gt == 0) {
            st->tail = end;
            st->flag = 0;
        }
        group_sync<G, WARPS_PER_BLOCK>();
        // Edge-parallel over the frontier, each warp 32 vertices at a time: a warp scan of
        // their degrees, then each lane takes one edge and finds its vertex by a binary search
        // over the scan. The level cut filters the edges; the survivors are visited where
        // they lie or, with `pack`, 32 at a time from the warp's slots (npk of them waiting).
        int npk = 0;
        bool stop = false;
        for (int base = head + gw * 32; !stop; base += G * 32) {
            const bool last = base >= end;  // one step more for the survivors still waiting
            if (last && npk == 0) break;
            const int i = base + lane;
            int deg = 0;
            i64 beg = 0;
            if (i < end) {
                const int v = q[i];
                beg = p[v];
                deg = (int)(p[v + 1] - beg);
            }
            int incl = deg;
            for (int o = 1; o < 32; o <<= 1) {
                const int y = __shfl_up_sync(FULL_MASK, incl, o);
                if (lane >= o) incl += y;
            }
            const int total = __shfl_sync(FULL_MASK, incl, 31), excl = incl - deg;
            for (int e0 = 0; (e0 < total || (last && e0 == 0)) && !stop; e0 += 32) {
                const int e = e0 + lane;
                int owner = 0;  // the last lane whose edges start at or before e
                for (int step = 16; step > 0; step >>= 1) {
                    const int probe = owner + step;
                    if (__shfl_sync(FULL_MASK, excl, probe & 31) <= e && probe < 32) owner = probe;
                }
                const i64 ob = __shfl_sync(FULL_MASK, beg, owner);
                const int oe = __shfl_sync(FULL_MASK, excl, owner);
                int w = -1;  // the far end of this lane's edge, when the level cut leaves it
                if (e < total) {
                    const i64 k = ob + (e - oe);
                    w = x[k];
                    if (xl && w != end_w && edge_level_excludes(fwd, xl[k], level_s, level_t))
                        w = -1;
                }
                if (pack) {
                    const unsigned kept = __ballot_sync(FULL_MASK, w >= 0);
                    if (w >= 0) pk[npk + __popc(kept & ((1u << lane) - 1u))] = w;
                    npk += __popc(kept);
                    __syncwarp();
                    w = -1;
                    if (npk >= 32 || last) {
                        const int take = min(npk, 32);
                        npk -= take;
                        if (lane < take) w = pk[npk + lane];
                    }
                }
                if (w >= 0) visit(w, fwd, s, t, lab, seen, side, q, cap, st);
                __syncwarp();  // (the slots just read are written again next step)
                stop = __shfl_sync(FULL_MASK, *((volatile int*)&st->flag), 0) != 0;
            }
            if (last) break;
        }
        group_sync<G, WARPS_PER_BLOCK>();
        const int flag = *((volatile int*)&st->flag);
        const int tail = min(*((volatile int*)&st->tail), cap);
        group_sync<G, WARPS_PER_BLOCK>();
        if (fwd) { hf = end; tf = tail; } else { hb = end; tb = tail; }
        if (flag) {
            result = flag == 1 ? 1 : 2;
            break;
        }
    }
    // Leave the set empty: each vertex the pair put in it removed (a random probe each), or,
    // once those outnumber a 32nd of the table's slots, the whole table zeroed with
    // coalesced 16-byte stores.
    const int nspill = min(st->nspill, SPILL);
    if (seen.mode == 0 && (i64)(tf + tb + nspill) * 32 > (i64)seen.mask + 1) {
        uint4* slots = reinterpret_cast<uint4*>(seen.table);
        const int n4 = (int)((seen.mask + 1u) >> 2);
        for (int i = gt; i < n4; i += G * 32) slots[i] = make_uint4(0u, 0u, 0u, 0u);
    } else {
        for (int i = gt; i < tf; i += G * 32) seen.remove(qf[i]);
        for (int i = gt; i < tb; i += G * 32) seen.remove(qb[i]);
        for (int i = gt; i < nspill; i += G * 32) seen.remove(st->spill[i]);
    }
    group_sync<G, WARPS_PER_BLOCK>();
    return result;
}

// One round: groups of G warps take pairs ids[k] (ids: nullptr = 0..npairs-1) from *next until
// none is left; out[id] = 1 or 0, or id appended to overflow (length *n_overflow). Group g owns
// scratch + g * per_group bytes: mode 0: a table of 4 * cap u32 slots, then the two queues of
// cap ints; mode 1: (n + 15) / 16 words of bits, then the two queues of cap (= n) ints. The
// scratch must be zero on entry and is left zero.
template <int G>
__device__ void bidir_round(int npairs, const int* ids, const int* pu, const int* pt, int n,
                            const i64* ptr, const int* idx, const i64* rptr, const int* ridx,
                            const short* lvl, const short* rlvl, const LabelView& lab,
                            int mode, int cap, char* scratch,
                            i64 per_group, int ngroups, unsigned char* out, int* next,
                            int* n_overflow, int* overflow, int pack, StepState* steps,
                            int* packed) {
    const int group = thread_rank() / (32 * G);
    const int gt = threadIdx.x % (32 * G);
    if (group >= ngroups) return;  // whole groups leave together
    char* mine = scratch + (i64)group * per_group;
    Reached seen;
    seen.mode = mode;
    int* qf;
    if (mode == 1) {
        seen.bits = (unsigned*)mine;
        seen.table = nullptr;
        seen.mask = 0u;
        qf = (int*)(mine + (((i64)((n + 15) >> 4) * 4 + 15) & ~(i64)15));
    } else {
        seen.table = (unsigned*)mine;
        seen.bits = nullptr;
        seen.mask = 4u * (unsigned)cap - 1u;
        qf = (int*)(mine + (i64)4 * cap * 4);
    }
    int* qb = qf + cap;
    StepState* st = &steps[(threadIdx.x >> 5) / G];
    int* pk = packed + (threadIdx.x >> 5) * PACK_SLOTS;
    for (;;) {
        if (gt == 0) st->pair = atomicAdd(next, 1);
        group_sync<G, WARPS_PER_BLOCK>();
        const int k = *((volatile int*)&st->pair);
        group_sync<G, WARPS_PER_BLOCK>();
        if (k >= npairs) return;
        const int id = ids ? ids[k] : k;
        const int r = bidir_pair<G>(pu[id], pt[id], ptr, idx, rptr, ridx, lvl, rlvl, lab, seen,
                                    qf, qb, cap, st, pack != 0, pk);
        if (gt == 0) {
            if (r == 2) overflow[atomicAdd(n_overflow, 1)] = id;
            else out[id] = (unsigned char)r;
        }
    }
}

#define BIDIR_PARAMS                                                                         \
    int npairs, const int *ids, const int *pu, const int *pt, int n, const i64 *ptr,          \
        const int *idx, const i64 *rptr, const int *ridx, const short *lvl,                  \
        const short *rlvl, LABEL_PARAMS,                                                     \
        int mode, int cap, char *scratch, i64 per_group, int ngroups,                         \
        unsigned char *out, int *next, int *n_overflow, int *overflow, int pack
#define BIDIR_ARGS                                                                           \
    npairs, ids, pu, pt, n, ptr, idx, rptr, ridx, lvl, rlvl,                                 \
        LABEL_VIEW, mode, cap,                                                               \
        scratch, per_group, ngroups, out, next, n_overflow, overflow, pack

// A round with groups of G warps per pair, WARPS_PER_BLOCK / G groups per block: one warp for
// many small searches at once, more for the large ones (bidir_g1_kernel ... bidir_g8_kernel).
// At most 64 registers per thread, so that 4 blocks fit on an SM (the packing took the
// kernels from 56 to 71-76 registers, 3 blocks, without the bound; 8 bytes spill in g1).
#define BIDIR_KERNEL(G)                                                                      \
    extern "C" __global__ void __launch_bounds__(32 * WARPS_PER_BLOCK, 4)                    \
        bidir_g##G##_kernel(BIDIR_PARAMS) {                                                  \
        __shared__ StepState steps[WARPS_PER_BLOCK / G];                                     \
        __shared__ int packed[WARPS_PER_BLOCK * PACK_SLOTS];                                 \
        bidir_round<G>(BIDIR_ARGS, steps, packed);                                           \
    }
BIDIR_KERNEL(1)
BIDIR_KERNEL(2)
BIDIR_KERNEL(4)
BIDIR_KERNEL(8)
