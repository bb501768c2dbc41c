"""Four LLVM instructions the Numba kernels of the build need and Numba does not offer.

``prefetch(a, i)`` asks the processor to start loading element ``i`` of a C-contiguous array
(flat index) into its caches without waiting for it. The build's sweeps visit vertices in an
order that the hardware cannot guess (a permutation of blocks, a topological order), so every
row they touch is a cache miss; naming the rows a few steps ahead lets those misses overlap
instead of running one after the other. It is LLVM's ``llvm.prefetch`` (read, high
locality), which LLVM lowers to the target's prefetch instruction, or to nothing where there
is none; it never faults, so any index is allowed.

``atomic_add(a, i, v)`` (returns the old value) and ``atomic_load(a, i)`` act on an element
of an integer array for the sweeps that share each level among the cores in one parallel
region (:mod:`.labels`): a core takes the next piece of a level with the first and waits for
the level's last piece with the second (sequentially consistent add, acquiring load), calling
``spin_pause()`` between two loads: x86's ``pause`` (a waiting hyperthread leaves its core's
units to its sibling), nothing elsewhere.

``trailing_zeros(x)``, the index of the lowest set bit of a non-zero uint64 (LLVM's
``cttz``, one instruction), lets a sweep visit the set bits of a word one after the other
instead of testing each of its 64 bits.

Each is a plain Python function that a compiled kernel replaces by the instruction
(``numba.extending.overload``): a kernel still interpreted (:mod:`grail_duckdb.jit`, one
thread) runs the Python meaning, so the build's kernels need no compiler for small work.
"""
from __future__ import annotations

import llvmlite.binding as llvm
from llvmlite import ir
from numba import types
from numba.core import cgutils
from numba.extending import intrinsic, overload

__all__ = ["atomic_add", "atomic_load", "prefetch", "spin_pause", "trailing_zeros"]


def _element(context, builder, signature, args):
    """A pointer to element ``args[1]`` (flat) of the array ``args[0]``."""
    ary = context.make_array(signature.args[0])(context, builder, args[0])
    index = context.cast(builder, args[1], signature.args[1], types.int64)
    return builder.gep(ary.data, [index])


@intrinsic
def _prefetch(typingctx, arr, index):
    """The instruction of :func:`prefetch`."""
    if not isinstance(arr, types.Array) or not isinstance(index, types.Integer):
        return None

    def codegen(context, builder, signature, args):
        ptr = builder.bitcast(_element(context, builder, signature, args),
                              ir.IntType(8).as_pointer())
        i32 = ir.IntType(32)
        fnty = ir.FunctionType(ir.VoidType(), [ptr.type, i32, i32, i32])
        # the unmangled name: LLVM upgrades it to the overload of its pointer type
        fn = cgutils.get_or_insert_function(builder.module, fnty, "llvm.prefetch")
        builder.call(fn, [ptr, i32(0), i32(3), i32(1)])
        return context.get_dummy_value()

    return types.void(arr, index), codegen


def _int_array(arr, index) -> bool:
    return (isinstance(arr, types.Array) and isinstance(arr.dtype, types.Integer)
            and isinstance(index, types.Integer))


@intrinsic
def _atomic_add(typingctx, arr, index, value):
    """The instruction of :func:`atomic_add`."""
    if not _int_array(arr, index) or not isinstance(value, types.Integer):
        return None

    def codegen(context, builder, signature, args):
        val = context.cast(builder, args[2], signature.args[2], signature.args[0].dtype)
        return builder.atomic_rmw("add", _element(context, builder, signature, args), val,
                                  "seq_cst")

    return arr.dtype(arr, index, value), codegen


@intrinsic
def _atomic_load(typingctx, arr, index):
    """The instruction of :func:`atomic_load`."""
    if not _int_array(arr, index):
        return None

    def codegen(context, builder, signature, args):
        width = signature.args[0].dtype.bitwidth // 8
        return builder.load_atomic(_element(context, builder, signature, args), "acquire",
                                   width)

    return arr.dtype(arr, index), codegen


@intrinsic
def _spin_pause(typingctx):
    """The instruction of :func:`spin_pause`."""

    def codegen(context, builder, signature, args):
        if llvm.get_process_triple().startswith(("x86_64", "i686", "i386")):
            fn = cgutils.get_or_insert_function(builder.module,
                                                ir.FunctionType(ir.VoidType(), []),
                                                "llvm.x86.sse2.pause")
            builder.call(fn, [])
        return context.get_dummy_value()

    return types.void(), codegen


@intrinsic
def _trailing_zeros(typingctx, x):
    """The instruction of :func:`trailing_zeros`."""
    if not isinstance(x, types.Integer) or x.bitwidth != 64:
        return None

    def codegen(context, builder, signature, args):
        i64 = ir.IntType(64)
        fn = cgutils.get_or_insert_function(
            builder.module, ir.FunctionType(i64, [i64, ir.IntType(1)]), "llvm.cttz.i64")
        return builder.call(fn, [args[0], ir.IntType(1)(1)])

    return types.int64(x), codegen


def prefetch(a, i) -> None:
    """``prefetch(a, i)``: hint that ``a.flat[i]`` is read soon (no effect on results)."""


def atomic_add(a, i, v):
    """``atomic_add(a, i, v)``: ``a.flat[i] += v`` at once for every thread; the old value."""
    old = a.flat[i]
    a.flat[i] = old + v
    return old


def atomic_load(a, i):
    """``atomic_load(a, i)``: ``a.flat[i]`` as the last write of any thread left it."""
    return a.flat[i]


def spin_pause() -> None:
    """``spin_pause()``: x86's ``pause`` inside a wait loop (elsewhere nothing)."""


def trailing_zeros(x):
    """``trailing_zeros(x)``: the index of the lowest set bit of ``x`` (a non-zero uint64)."""
    x = int(x)
    return (x & -x).bit_length() - 1


@overload(prefetch, inline="always")
def _prefetch_compiled(a, i):
    return lambda a, i: _prefetch(a, i)


@overload(atomic_add, inline="always")
def _atomic_add_compiled(a, i, v):
    return lambda a, i, v: _atomic_add(a, i, v)


@overload(atomic_load, inline="always")
def _atomic_load_compiled(a, i):
    return lambda a, i: _atomic_load(a, i)


@overload(spin_pause, inline="always")
def _spin_pause_compiled():
    return lambda: _spin_pause()


@overload(trailing_zeros, inline="always")
def _trailing_zeros_compiled(x):
    return lambda x: _trailing_zeros(x)
