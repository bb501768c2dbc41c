// The load's own decoding of the index file's label pages (engine/page_plan.py builds the page
// table; the CPU twins are cpu/pages.py: lz4_block and page_values, whose table columns these
// indices follow). A module of its own, launched plainly: the traversals' module launches every
// kernel cooperatively, which caps the grid at the blocks that fit at once and keeps other
// streams' work off the device meanwhile.
#include "common.cuh"
#define PAGE_COLUMNS 9
#define PAGE_LZ4 1
#define PAGE_SPLIT 2

// An LZ4 length whose token nibble is n: 15 goes on in the bytes from src[ip] (each added, until
// one under 255); ip moves past them. -1: the bytes run past size (cpu/pages._length).
__device__ int lz4_length(const unsigned char* src, int& ip, int size, int n) {
    if (n == 15) {
        int more;
        do {
            if (ip >= size) return -1;
            more = src[ip++];
            n += more;
        } while (more == 255 && n < (1 << 30));
    }
    return n;
}

// The LZ4 block src[0:size) decoded into dst[0:n) by one warp (cpu/pages.lz4_block): every
// lane reads the same tokens (one broadcast load each) and the lanes copy a sequence's
// literals and its match side by side; a match copies dst[q - offset + k % offset], the bytes
// of LZ4's byte-by-byte overlapping copy, so a run of one byte (offset 1, the zero bytes of a
// byte-stream-split page) is written 32 bytes at a time. False: the block does not decode into
// exactly n bytes, or reaches outside its bounds.
__device__ bool lz4_block_warp(const unsigned char* src, int size, unsigned char* dst, int n,
                               int lane) {
    int ip = 0, q = 0;
    while (ip < size) {
        const int token = src[ip++];
        const int lit = lz4_length(src, ip, size, token >> 4);
        if (lit < 0 || lit > size - ip || lit > n - q) return false;
        for (int k = lane; k < lit; k += 32) dst[q + k] = src[ip + k];
        ip += lit;
        q += lit;
        if (ip == size) break;  // the last sequence: literals only
        if (ip + 2 > size) return false;
        const int offset = src[ip] | (src[ip + 1] << 8);
        ip += 2;
        if (offset == 0 || offset > q) return false;
        int length = lz4_length(src, ip, size, token & 15);
        if (length < 0) return false;
        length += 4;
        if (length > n - q) return false;
        __syncwarp();  // the bytes written so far, before a match reads them
        for (int k = lane; k < length; k += 32) dst[q + k] = dst[q - offset + k % offset];
        __syncwarp();
        q += length;
    }
    return q == n;
}

// One page of the table (pages_kernel below).
__device__ void decode_page(const unsigned char* src, const i64* t, i64 kept,
                            unsigned char* scratch, int* err) {
    const i64 at = t[0], size = t[1], raw = t[2], s0 = t[3], first = t[4], rows = t[5];
    const int width = (int)t[6], flags = (int)t[7];
    unsigned char* out = (unsigned char*)t[8];
    // what every thread of the block checks alike, so that the barriers below are the block's
    bool good = raw == rows * width && (width == 4 || width == 8) && raw < (1ll << 31) &&
                ((flags & PAGE_LZ4) || size == raw);
    if (good && (flags & PAGE_LZ4)) {
        __shared__ int ok;
        if (threadIdx.x < 32) {
            const bool done = lz4_block_warp(src + at, (int)size, scratch + s0, (int)raw,
                                             threadIdx.x);
            if (threadIdx.x == 0) ok = done;
        }
        __syncthreads();
        good = ok;
        __syncthreads();  // every thread has read ok before the next page's warp sets it
    }
    if (!good) {
        if (threadIdx.x == 0) atomicExch(err, 1);
        return;
    }
    const unsigned char* body = (flags & PAGE_LZ4) ? scratch + s0 : src + at;
    const bool split = flags & PAGE_SPLIT;
    const i64 stop = rows < kept - first ? rows : kept - first;  // rows past kept: not written
    for (i64 i = threadIdx.x; i < stop; i += blockDim.x) {
        const i64 to = first + i;
        u64 v = 0;
        for (int k = 0; k < width; ++k)
            v |= (u64)body[split ? k * rows + i : i * width + k] << (8 * k);
        if (width == 4)
            ((unsigned*)out)[to] = (unsigned)v;
        else
            ((u64*)out)[to] = v;
    }
}

// One block per page of the table at a time (cpu/pages.page_values, whose columns these are):
// the block's first warp decompresses an LZ4 page into the scratch, then every thread
// assembles values (PLAIN or byte-stream-split, 4 or 8 bytes) and writes row r of the row
// group to element r of the page's destination, for r < kept (the rows after them hold no
// component's labels). A page that does not hold its values sets *err and writes nothing.
extern "C" __global__ void pages_kernel(const unsigned char* src, const i64* table, int n_pages,
                                        i64 kept, unsigned char* scratch, int* err) {
    for (int p = blockIdx.x; p < n_pages; p += gridDim.x)
        decode_page(src, table + (i64)p * PAGE_COLUMNS, kept, scratch, err);
}

// --- the save's own encoding of label pages (cpu/pages.py: parse_chunks, emit_chunks) -----
// A warp parses a chunk of a page (CHUNK bytes, cpu/pages.CHUNK): its lanes look at WINDOW
// positions together, each finding its candidate in its hash slot as it stood before the
// window or at the window's first lane of the same hash; the first lane with a match takes
// it, the lanes before it write their slots (the first of each hash), and the lanes extend
// the match both ways and write its sequence. A second kernel lays each chunk's sequences at
// their place in the page's block, where the literals that end a chunk join the next one's.
#define HASH_BITS 12
#define EMPTY_SLOT 0xFFFF
#define MIN_MATCH 4
#define LAST_LITERALS 5
#define MF_LIMIT 12
#define WINDOW 32
#define CHUNK_COLUMNS 5
#define RECORD_COLUMNS 6
#define PLACE_COLUMNS 3

// The hash slot of the 5 bytes at s (cpu/pages._hash5).
__device__ __forceinline__ int hash5(const unsigned char* s) {
    u64 v = 0;
    for (int k = 0; k < 5; ++k) v |= (u64)s[k] << (8 * k);
    return (int)(((v << 24) * 889523592379ull) >> (64 - HASH_BITS));
}

// The bytes of an LZ4 length past its token's 15 at out[q], written by the warp's lanes; the
// next position.
__device__ i64 put_length(unsigned char* out, i64 q, i64 n, int lane) {
    const i64 full = n / 255;
    for (i64 k = lane; k < full; k += WINDOW) out[q + k] = 255;
    if (lane == 0) out[q + full] = (unsigned char)(n - full * 255);
    return q + full + 1;
}

// One LZ4 sequence at out[q] (cpu/pages._sequence): lit literals from src[lit_at], then a
// match of match bytes at offset back (match 0: the block's last sequence); the next position.
__device__ i64 put_sequence(const unsigned char* src, i64 lit_at, i64 lit, unsigned char* out,
                            i64 q, i64 offset, i64 match, int lane) {
    const i64 tok = q++;
    unsigned char token = (unsigned char)((lit < 15 ? lit : 15) << 4);
    if (lit >= 15) q = put_length(out, q, lit - 15, lane);
    for (i64 k = lane; k < lit; k += WINDOW) out[q + k] = src[lit_at + k];
    q += lit;
    if (match) {
        if (lane == 0) {
            out[q] = (unsigned char)(offset & 255);
            out[q + 1] = (unsigned char)(offset >> 8);
        }
        q += 2;
        token |= (unsigned char)(match - 4 < 15 ? match - 4 : 15);
        if (match - 4 >= 15) q = put_length(out, q, match - 4 - 15, lane);
    }
    if (lane == 0) out[tok] = token;
    return q;
}

// How far the match of s[p] against s[r] goes from its m-th byte, below limit: 4 bytes a lane.
__device__ i64 extend_match(const unsigned char* s, i64 r, i64 p, i64 m, i64 limit, int lane) {
    for (;; m += 4 * WINDOW) {
        const i64 at = m + 4 * lane;
        int k = 0;
        while (k < 4 && at + k < limit && s[r + at + k] == s[p + at + k]) ++k;
        const unsigned stop = __ballot_sync(FULL_MASK, k < 4);
        if (stop) {
            const int f = __ffs(stop) - 1;
            return m + 4 * f + __shfl_sync(FULL_MASK, k, f);
        }
    }
}

// One warp (a block of WINDOW threads) per chunk (cpu/pages.parse_chunk, whose slots, windows
// and matches these are): the sequences after the first to rest, the record of the chunk.
extern "C" __global__ void parse_chunks_kernel(const unsigned char* src, const i64* chunks,
                                               int n_chunks, unsigned char* rest,
                                               i64* records) {
    __shared__ unsigned short slots[1 << HASH_BITS];
    const int lane = threadIdx.x;
    for (int c = blockIdx.x; c < n_chunks; c += gridDim.x) {
        const i64* ch = chunks + (i64)c * CHUNK_COLUMNS;
        i64* rec = records + (i64)c * RECORD_COLUMNS;
        const unsigned char* s = src + ch[0];
        const i64 n = ch[1], c0 = ch[2], c1 = ch[3], r0 = ch[4];
        for (int k = lane; k < (1 << HASH_BITS); k += WINDOW) slots[k] = EMPTY_SLOT;
        __syncwarp();
        const i64 stop = c1 < n - MF_LIMIT ? c1 : n - MF_LIMIT;
        const i64 end = c1 < n - LAST_LITERALS ? c1 : n - LAST_LITERALS;
        i64 q = r0, anchor = c0, i = c0, matches = 0;
        while (i < stop) {
            const i64 w = stop - i < WINDOW ? stop - i : WINDOW;
            const i64 pos = i + lane;
            int h = (1 << HASH_BITS) + lane;  // lanes past the window: a key alone
            i64 ref = -1;
            if (lane < w) {
                h = hash5(s + pos);
                ref = slots[h] == EMPTY_SLOT ? -1 : c0 + slots[h];
            }
            const int lead = __ffs(__match_any_sync(FULL_MASK, h)) - 1;
            if (lead < lane) ref = i + lead;
            const bool hit = lane < w && ref >= 0 && ref < pos && pos + MIN_MATCH <= end &&
                             s[ref] == s[pos] && s[ref + 1] == s[pos + 1] &&
                             s[ref + 2] == s[pos + 2] && s[ref + 3] == s[pos + 3];
            const unsigned hits = __ballot_sync(FULL_MASK, hit);
            const int f = hits ? __ffs(hits) - 1 : WINDOW;
            if (lane < w && lane < f && lead == lane) slots[h] = (unsigned short)(pos - c0);
            __syncwarp();
            if (!hits) {
                i += w;
                continue;
            }
            i64 p = i + f, r = __shfl_sync(FULL_MASK, ref, f);
            i64 m = extend_match(s, r, p, MIN_MATCH, end - p, lane);
            while (p > anchor && r > 0 && s[p - 1] == s[r - 1]) {
                --p;
                --r;
                ++m;
            }
            if (matches) {
                q = put_sequence(s, anchor, p - anchor, rest, q, p - r, m, lane);
            } else if (lane == 0) {
                rec[1] = p - c0;
                rec[2] = p - r;
                rec[3] = m;
            }
            ++matches;
            i = anchor = p + m;
            if (lane == 0) slots[hash5(s + i - 2)] = (unsigned short)(i - 2 - c0);
            __syncwarp();
        }
        if (lane == 0) {
            rec[0] = matches;
            rec[4] = q - r0;
            rec[5] = anchor;
        }
        __syncwarp();
    }
}

// One warp per chunk (cpu/pages.emit_chunks): its first sequence from its place's anchor, its
// other sequences from rest, and where it ends its page the block's last literals.
extern "C" __global__ void emit_chunks_kernel(const unsigned char* src, const i64* chunks,
                                              int n_chunks, const unsigned char* rest,
                                              const i64* records, const i64* places,
                                              unsigned char* out) {
    const int lane = threadIdx.x;
    for (int c = blockIdx.x; c < n_chunks; c += gridDim.x) {
        const i64* ch = chunks + (i64)c * CHUNK_COLUMNS;
        const i64* rec = records + (i64)c * RECORD_COLUMNS;
        const i64* pl = places + (i64)c * PLACE_COLUMNS;
        const unsigned char* s = src + ch[0];
        i64 q = pl[0], anchor = pl[1];
        if (rec[0]) {
            const i64 p = ch[2] + rec[1];
            q = put_sequence(s, anchor, p - anchor, out, q, rec[2], rec[3], lane);
            for (i64 k = lane; k < rec[4]; k += WINDOW) out[q + k] = rest[ch[4] + k];
            q += rec[4];
            anchor = rec[5];
        }
        if (pl[2]) put_sequence(s, anchor, ch[1] - anchor, out, q, 0, 0, lane);
    }
}
