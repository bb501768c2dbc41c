"""A cache hint for the Numba kernels: ``prefetch(a, i)`` asks the processor to start loading
element ``i`` of a C-contiguous array (flat index) into its caches, without waiting for it.

The build's sweeps visit vertices in an order that the hardware cannot guess (a permutation of
blocks, a topological order), so every row they touch is a cache miss; naming the rows a few
steps ahead lets those misses overlap instead of running one after the other. The hint is
LLVM's ``llvm.prefetch`` (read, high locality), which LLVM lowers to the target's prefetch
instruction, or to nothing where there is none; it never faults, so any index is allowed.
"""
from __future__ import annotations

from llvmlite import ir
from numba import types
from numba.core import cgutils
from numba.extending import intrinsic

__all__ = ["prefetch"]


@intrinsic
def prefetch(typingctx, arr, index):
    """``prefetch(a, i)``: hint that ``a.flat[i]`` is read soon (no effect on results)."""
    if not isinstance(arr, types.Array) or not isinstance(index, types.Integer):
        return None
    sig = types.void(arr, index)

    def codegen(context, builder, signature, args):
        ary = context.make_array(signature.args[0])(context, builder, args[0])
        i64 = ir.IntType(64)
        offset = (builder.sext(args[1], i64) if signature.args[1].signed
                  else builder.zext(args[1], i64)) if args[1].type.width < 64 else args[1]
        ptr = builder.bitcast(builder.gep(ary.data, [offset]), ir.IntType(8).as_pointer())
        i32 = ir.IntType(32)
        fnty = ir.FunctionType(ir.VoidType(), [ptr.type, i32, i32, i32])
        # the unmangled name: LLVM upgrades it to the overload of its pointer type
        fn = cgutils.get_or_insert_function(builder.module, fnty, "llvm.prefetch")
        builder.call(fn, [ptr, i32(0), i32(3), i32(1)])
        return context.get_dummy_value()

    return sig, codegen
