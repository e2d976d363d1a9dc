"""Counting with atomics into an in-out buffer; keys outside the bins are dropped."""
import torch

import intent
from intent import InOut, dims, i32, parallel

E, B = dims("E B")


@intent.kernel
def histogram(x: i32[E], counts: InOut[i32[B]]):
    for e in parallel(E):
        intent.atomic_add(counts, x[e], 1)


def cases():
    gen = torch.Generator().manual_seed(107)
    for e, b in ((1, 1), (500, 9), (6000, 128)):
        keys = torch.randint(-3, b + 3, (e,), generator=gen, dtype=torch.int32)
        start = torch.randint(0, 4, (b,), generator=gen, dtype=torch.int32)
        kept = keys[(keys >= 0) & (keys < b)].long()
        want = start + torch.bincount(kept, minlength=b).to(torch.int32)
        yield histogram, {"x": keys, "counts": start.clone()}, {"counts": want}
