"""Sparse matrix (CSR) times a dense vector: `y[r] = sum(values[k] * x[cols[k]])` over row r's entries.

A row's entries are the data-dependent range [rowptr[r], rowptr[r + 1]) of two arrays (values and
column indices), so each row is an ordered loop with runtime bounds; `x[cols[k]]` is a gather.
`requires=[NNZ >= 0]` admits a matrix without entries (a shape symbol is at least 1 otherwise).
"""

import intent
from intent import Out, dims, f32, i32, i64, parallel

R, C, NNZ = dims("R C NNZ")


@intent.kernel(requires=[NNZ >= 0])
def csr_spmv(values: f32[NNZ], cols: i32[NNZ], rowptr: i64[R + 1], x: f32[C], y: Out[f32[R]]):
    for r in parallel(R):
        acc = f32(0.0)
        for k in range(rowptr[r], rowptr[r + 1]):
            acc += values[k] * x[cols[k]]
        y[r] = acc
