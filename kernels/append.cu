// The labels of components appended to a built index, folded from their children
// (grail_duckdb/engine/append.py; the CPU twin is grail_duckdb/kernels/cpu/append.py).
//
// Local ids: the appended components are rows 0 .. n-1 (their children idx[ptr[v]:ptr[v+1]]),
// the built components they point to follow them, their rows holding their labels. Levels
// L = 0 .. levels-1 of order/offs hold the appended ones with every child at a lower level. A
// component with children gets, per GRAIL label, the smallest inner and largest outer among
// them, the OR of their hub words and of their window hub words rebased into its own window
// (base[v]: its window's first hub, span: 64 window words); one with none keeps its row.
// A warp per component; the grid meets at grid.sync() between levels.
extern "C" __global__ void append_fold_kernel(int levels, int d, int W, int ww, int span,
                                              const i64* ptr, const int* idx, const int* order,
                                              const int* offs, const int* base, int* inner,
                                              int* outer, u64* down, u64* wdown) {
    cg::grid_group g = cg::this_grid();
    const int lane = threadIdx.x & 31;
    const int warp = thread_rank() >> 5, nwarps = thread_count() >> 5;
    for (int L = 0; L < levels; ++L) {
        for (int i = offs[L] + warp; i < offs[L + 1]; i += nwarps) {
            const int v = order[i];
            const i64 b = ptr[v], e = ptr[v + 1];
            if (b == e) continue;
            for (int j = 0; j < d; ++j) {
                int lo = 0x7fffffff, hi = -0x7fffffff - 1;
                for (i64 x = b + lane; x < e; x += 32) {
                    const i64 w = idx[x];
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
            for (int k = 0; k < W; ++k) {
                u64 acc = 0ull;
                for (i64 x = b + lane; x < e; x += 32) acc |= down[(i64)idx[x] * W + k];
                for (int o = 16; o > 0; o >>= 1) acc |= __shfl_xor_sync(FULL_MASK, acc, o);
                if (lane == 0) down[(i64)v * W + k] = acc;
            }
            for (int k = 0; k < ww; ++k) {
                u64 acc = 0ull;
                for (i64 x = b + lane; x < e; x += 32) {
                    const int w = idx[x];
                    const int sh = base[w] - base[v];
                    if (sh > -span && sh < span) acc |= shifted_word(wdown, ww, w, k, sh);
                }
                for (int o = 16; o > 0; o >>= 1) acc |= __shfl_xor_sync(FULL_MASK, acc, o);
                if (lane == 0) wdown[(i64)v * ww + k] = acc;
            }
        }
        g.sync();
    }
}
