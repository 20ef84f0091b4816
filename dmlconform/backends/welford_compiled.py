"""Welford's running mean and sum of squared deviations per thread, in float32, compiled: the
``gpu-style`` backend's ``variance=welford`` at any reduction length (a Python loop over a
slice of 2^22 elements would take minutes). Its own module so that importing the backend never
imports numba.

Every operation is float32 and in element order (numba does not reassociate float arithmetic),
so a chain here is the chain a GPU thread or a SIMD lane runs.
"""

from __future__ import annotations

import numpy as np

from dmlconform.native import njit


@njit(cache=True)
def welford_chains(rows, threads, strided, count, mean, m2):  # type: ignore[no-untyped-def]
    """Per row r and thread t, Welford over the thread's share in order (strided: elements
    t, t + T, ...; else the contiguous chunk t): k += 1; d = x - m; m += d / k; M2 += d (x - m).
    Writes (count, mean, M2) of shape (rows, T), all float32."""
    m_rows, n = rows.shape
    k_len = (n + threads - 1) // threads
    one = np.float32(1.0)
    for r in range(m_rows):
        for t in range(threads):
            k = np.float32(0.0)
            mu = np.float32(0.0)
            acc = np.float32(0.0)
            for j in range(k_len):
                i = t + j * threads if strided else t * k_len + j
                if i >= n:
                    break
                x = rows[r, i]
                k = k + one
                d = np.float32(x - mu)
                mu = np.float32(mu + np.float32(d / k))
                acc = np.float32(acc + np.float32(d * np.float32(x - mu)))
            count[r, t] = k
            mean[r, t] = mu
            m2[r, t] = acc
