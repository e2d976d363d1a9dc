"""Choosing 32- or 64-bit index arithmetic for one launch: defined in `intent.runtime.index_width`, which
prebuilt kernels (`intent.load`) use without the compiler."""

from intent.runtime.index_width import INT32_MAX, IndexWidth, TensorExtent, choose_index_width, reachable_offset

__all__ = ["INT32_MAX", "IndexWidth", "TensorExtent", "choose_index_width", "reachable_offset"]
