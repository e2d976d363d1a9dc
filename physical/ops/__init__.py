"""Physical op classes, one module per KIR family (plus program-space ops)."""

from ..model import Trait
from ._base import OP_CLASSES, pop
from .access import DEVICE_CHECK, Check, Load, Store
from .atomic import SCOPE_FOR_SHARING, AtomicCAS, AtomicRMW, Sharing
from .buffers import AllocBuffer
from .contract import Contract, MatMul
from .control import For, If, While, Yield
from .histogram import BinCount, Histogram
from .lanes import LaneFold, LaneScan
from .layout import Broadcast, ExpandDims, Permute, Squeeze, TileConcat, TileReshape, TileSlice
from .lookback import SYNC_DONE, SYNC_FLAGS, SYNC_TICKET, FoldSlots, PublishSlot, RetireTicket, slot_dtype
from .pointwise import Binary, Bitcast, Cast, Compare, Const, Select, Unary
from .program import (
    Barrier,
    BlockLoop,
    ChunkLanes,
    LoopedRows,
    OwnedInstances,
    OwnedTile,
    ScalarParam,
    ShapeValue,
    TileIndex,
    block_loop,
    forms,
    instance_ops,
    looped_rows,
    once_ops,
    whole_form,
    with_form,
)
from .reduce import Reduce, native_reduce
from .region import RegionFold, RegionScan, held_block, is_held
from .rng import Random
from .scan import Scan, native_scan
from .sort import Sort
from .workspace import HelperIndex, SplitIndex, Ticket

__all__ = ["OP_CLASSES", "pop", "Trait", "DEVICE_CHECK", "Check", "Load", "Store", "AtomicRMW", "AtomicCAS", "Sharing",
           "SCOPE_FOR_SHARING", "AllocBuffer", "Contract", "MatMul", "For", "If", "While", "Yield", "Histogram",
           "BinCount", "Broadcast", "ExpandDims", "Permute", "Squeeze", "TileSlice", "TileConcat", "TileReshape",
           "Binary", "Bitcast", "Cast", "Compare", "Const", "Select", "Unary", "Barrier", "BlockLoop", "ChunkLanes",
           "block_loop", "instance_ops", "once_ops",
           "LoopedRows", "looped_rows", "forms", "whole_form", "with_form",
           "LaneFold", "LaneScan", "OwnedInstances", "OwnedTile", "ScalarParam", "ShapeValue", "TileIndex", "Reduce",
           "RegionFold",
           "RegionScan", "held_block", "is_held", "Random", "Scan", "Sort", "native_reduce", "native_scan",
           "SplitIndex", "HelperIndex", "Ticket",
           "PublishSlot", "FoldSlots", "RetireTicket", "SYNC_TICKET", "SYNC_DONE", "SYNC_FLAGS", "slot_dtype"]
