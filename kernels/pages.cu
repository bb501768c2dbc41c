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
