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

// --- the save's own encoding of label pages (cpu/pages.py: lz4_encode, encode_pages) -------
#define HASH_BITS 12
#define HASH_EMPTY 0xFFFF
#define LAST_LITERALS 5
#define MF_LIMIT 12
#define ENC_COLUMNS 3

// The bytes of an LZ4 length past its token's 15 at out[q]; the next position.
__device__ i64 put_length(unsigned char* out, i64 q, i64 n) {
    for (; n >= 255; n -= 255) out[q++] = 255;
    out[q] = (unsigned char)n;
    return q + 1;
}

// One LZ4 sequence at out[q]: lit literals from src[lit_at], then a match of match bytes at
// offset back (match 0: the block's last sequence, literals only); the next position.
__device__ i64 put_sequence(const unsigned char* src, i64 lit_at, i64 lit, unsigned char* out,
                            i64 q, i64 offset, i64 match) {
    const i64 tok = q++;
    unsigned char token = (unsigned char)((lit < 15 ? lit : 15) << 4);
    if (lit >= 15) q = put_length(out, q, lit - 15);
    for (i64 k = 0; k < lit; ++k) out[q + k] = src[lit_at + k];
    q += lit;
    if (match) {
        out[q] = (unsigned char)(offset & 255);
        out[q + 1] = (unsigned char)(offset >> 8);
        q += 2;
        token |= (unsigned char)(match - 4 < 15 ? match - 4 : 15);
        if (match - 4 >= 15) q = put_length(out, q, match - 4 - 15);
    }
    out[tok] = token;
    return q;
}

// src[0:n) (n <= 64 KiB) as one greedy LZ4 block at out; its length (cpu/pages.lz4_encode,
// the same positions, hashes and matches, so the same bytes).
__device__ i64 lz4_encode(const unsigned char* src, i64 n, unsigned char* out,
                          unsigned short* table) {
    for (int k = 0; k < (1 << HASH_BITS); ++k) table[k] = HASH_EMPTY;
    i64 q = 0, anchor = 0, i = 0;
    while (i < n - MF_LIMIT) {
        const u64 v = (u64)src[i] | ((u64)src[i + 1] << 8) | ((u64)src[i + 2] << 16) |
                      ((u64)src[i + 3] << 24);
        const unsigned h = (unsigned)(((v * 2654435761ull) & 0xFFFFFFFFull) >> (32 - HASH_BITS));
        const i64 ref = table[h];
        table[h] = (unsigned short)i;
        if (ref != HASH_EMPTY && src[ref] == src[i] && src[ref + 1] == src[i + 1] &&
            src[ref + 2] == src[i + 2] && src[ref + 3] == src[i + 3]) {
            i64 m = 4;
            while (i + m < n - LAST_LITERALS && src[ref + m] == src[i + m]) ++m;
            q = put_sequence(src, anchor, i - anchor, out, q, i - ref, m);
            i += m;
            anchor = i;
        } else {
            ++i;
        }
    }
    q = put_sequence(src, anchor, n - anchor, out, q, 0, 0);
    return q;
}

// One thread per page of the table (cpu/pages.encode_pages: the source's offset, the page's
// bytes, its block's offset in out), each with its own hash table of 2^HASH_BITS slots in
// hashes; sizes[p] receives page p's block length.
extern "C" __global__ void encode_pages_kernel(const unsigned char* src, const i64* table,
                                               int n_pages, unsigned char* out, i64* sizes,
                                               unsigned short* hashes) {
    const i64 t = (i64)blockIdx.x * blockDim.x + threadIdx.x;
    unsigned short* own = hashes + t * (1 << HASH_BITS);
    for (i64 p = t; p < n_pages; p += (i64)gridDim.x * blockDim.x) {
        const i64* row = table + p * ENC_COLUMNS;
        sizes[p] = lz4_encode(src + row[0], row[1], out + row[2], own);
    }
}
