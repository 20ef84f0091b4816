"""The judge's compiled kernels: slice statistics and the per-element budget + comparison pass.

Why compiled: the numpy model (:mod:`dmlconform.tolerance`, :mod:`dmlconform.tolerance.normalization`)
builds dozens of tensor-sized float64 temporaries per case (about 150 bytes per element) and
costs 400-800x the reference at n = 2^22. Here every per-element quantity lives in registers:

- :func:`slice_statistics` reads each slice twice: its mean and variance (the reference kernel's
  shifted sums, :func:`dmlconform.reference.compiled._centered_stats`), then the spread of the
  squared deviations and the slice's values as ordinal keys (both loops vectorized), whose
  distinct count gives the repetition ``r`` (radix buckets and a bitmap marked without a
  branch: no sort of the slice);
- the per-slice terms of the model (growth, e_mean, e_var, ...) are computed by the numpy
  model's own functions on these (K,) arrays, so they are the same code;
- :func:`judge_normalization` computes each element's budget and error in blocks of
  :data:`BLOCK` elements with one branch-free loop that LLVM vectorizes, reduces them to
  per-item figures (worst ratio and where, max ULP, max abs error, failing count, the aggregate
  fit's sums) and stores nothing per element unless asked to (the tests ask for the budgets to
  hold them against the numpy model).

What keeps the element loop vectorized (each measured: without it the pass ran 1.5-3x slower):
selects instead of branches (:func:`vmax`, :func:`ordinal16`, :func:`spacing`), float bit
casts in registers (``np.float32(v).view(np.int32)``) instead of a store and load through a
one-element array, unsigned indices (a signed index costs a negative-index wraparound select
per access), one work array for all block terms and lanes (a dozen arrays made LLVM give up on
its runtime alias checks), multiplications by per-slice reciprocals, integer maxima of the
bits of non-negative floats instead of float maxima or conditional stores (which became masked
scatters), and one copy of the loop per output type (``half`` a literal).

Slices are addressed as in the reference kernel (``x[k * sk + m * sm + j]``, kernel dims
(K, M, L)); operands arrive factorized (``T[tk[k], tr[r]]``). Kernels take a slice range
``[k0, k1)`` so that the glue runs chunks on the reference's thread pool (nogil).

Semantics mirror numpy's where it matters for equality with the model: NaN propagates through
``np.maximum``/``np.minimum`` (:func:`fmax`, :func:`fmin`), ``np.where(e > 0, ..., 1.0)`` is
false for NaN, the first strict maximum wins (np.argmax), and a NaN ratio is +inf.
"""

from __future__ import annotations

import math

import numpy as np

from dmlconform.native import njit, types
from dmlconform.reference.compiled import LANES, SHIFT_LIMIT, _centered_stats, _lane_total, activate
from dmlconform.tolerance.distinct_compiled import DIRECT_BITS, SMALL_SORT, count_distinct
from dmlconform.tolerance.exact_compiled import exact_slice
from dmlconform.tolerance.float_bits import (
    F16_EDGE,
    F16_MAX,
    F32_EDGE,
    F32_MAX,
    fmax,
    ordinal16,
    ordinal32,
    run_program,
    spacing,
    spacing16_exact,
    spacing32_exact,
    vmax,
    vmin,
)

# figure columns of the per-slice output (see judge_normalization)
F_RATIO, F_POS, F_ULP, F_ABS, F_FAIL, F_GOT, F_REF, F_BUDGET = range(8)
F_AA, F_BB, F_CC, F_DD, F_EE, F_COUNT, F_D2, F_RB2, F_ROUND2, F_BEND2 = range(8, 18)
N_FIGURES = 18

# ---------------------------------------------------------------------------------------------
# Statistics


@njit(cache=True)
def spread_row(row, mean, var, acc, sums):  # type: ignore[no-untyped-def]
    """Add a row's ((x - mean)^2 - var)^2 into the lanes ``acc`` (lane j % LANES: LLVM vectorizes
    the block loops) and its |x|, x and x^2 into the lanes of ``sums`` (3 LANES: the exactness
    test's, :mod:`dmlconform.tolerance.exact_compiled`)."""
    length = row.size
    nb = length // LANES
    for blk in range(nb):
        for j in range(LANES):
            v = np.float64(row[blk * LANES + j])
            d = v - mean
            q = d * d - var
            acc[j] += q * q
            sums[j] += abs(v)
            sums[LANES + j] += v
            sums[2 * LANES + j] += v * v
    for j in range(nb * LANES, length):
        v = np.float64(row[j])
        d = v - mean
        q = d * d - var
        acc[j - nb * LANES] += q * q
        sums[j - nb * LANES] += abs(v)
        sums[LANES + j - nb * LANES] += v
        sums[2 * LANES + j - nb * LANES] += v * v


@njit(cache=True)
def keys_and_range(row, row_bits, half, keys, base, lo, hi, nonfinite):  # type: ignore[no-untyped-def]
    """Each value's ordinal key (branch-free) into ``keys[base + j]``; returns the running
    smallest and largest finite key and non-finite count."""
    for j in range(row.size):
        v = row[j]
        key = (ordinal16(row_bits[j]) if half else ordinal32(row_bits[j])) + 2147483648
        keys[np.uint64(base + j)] = np.uint32(key)
        finite = abs(v) < np.float32(math.inf)
        nonfinite += np.int64(not finite)
        lo = min(lo, key) if finite else lo
        hi = max(hi, key) if finite else hi
    return lo, hi, nonfinite


@njit(cache=True)
def _spread_and_keys(row, row_bits, mean, var, half, acc, sums, keys, base, lo, hi, nonfinite):  # type: ignore[no-untyped-def]  # noqa: E501
    """:func:`spread_row`, then :func:`keys_and_range`."""
    spread_row(row, mean, var, acc, sums)
    return keys_and_range(row, row_bits, half, keys, base, lo, hi, nonfinite)


def _sig(*kinds: str):  # type: ignore[no-untyped-def]
    """An explicit signature from short codes (one specialization whatever the caller passes:
    read-only or not, any layout): f4/f8/i4/i8/b1 scalars, ``f4[]`` read-only 1-D arrays,
    ``f8[:]`` writable ones (1-D: C layout, which the reference's row sums need), ``f8[,]`` /
    ``f8[:,]`` 2-D read-only / writable (any layout)."""
    names = {
        "f4": types.float32,
        "f8": types.float64,
        "i4": types.int32,
        "i8": types.int64,
        "b1": types.boolean,
    }
    out = []
    for kind in kinds:
        base, _, dims = kind.partition("[")
        if not dims:
            out.append(names[base])
            continue
        ndim = 2 if "," in dims else 1
        out.append(types.Array(names[base], ndim, "C" if ndim == 1 else "A", readonly=":" not in dims))
    return types.void(*out)


_STATS_SIG = _sig(
    "f4[]", "i4[]", "i8", "i8", "i8", "i8", "i8", "i8", "b1", "b1", "f8", "b1", "f8[:]", "f8[:]", "f8[:]",
    "f8[:]", "f8[:]",
)  # fmt: skip
_OPERAND = ("f8[,]", "i8[]", "i8[]", "b1")
_JUDGE_SIG = _sig(
    "f4[]", "i8", "i8", "f4[]", "i8", "i8",
    "f4[]", "i4[]", "i8", "i8",
    "f4[]", "i4[]", "i8", "i8",
    "i8[]", "i8[]", "i8[]", "i8", "i8",
    *_OPERAND, *_OPERAND, *_OPERAND, *_OPERAND, *_OPERAND,
    "f8[]", "f8[]", "f8[]", "f8[]", "f8[]", "f8[]",
    "f8", "f8", "f8", "b1", "b1", "f8", "i8", "f8", "f8", "f8", "f8", "i8[]", "f8[]",
    "f8[]", "f8[,]", "f8", "f8",
    "b1", "f8", "f8", "f8", "f8", "b1",
    "f8[:,]", "f8[:]",
)  # fmt: skip


@njit(_STATS_SIG, cache=True, nogil=True, error_model="numpy")
def slice_statistics(
    x, x_bits, x_sk, x_sm, k0, k1, m_len, l_len, half, moments_only, limit, count_exact, mean_o, var_o, sqstd_o,
    distinct_o, exact_o,
):  # type: ignore[no-untyped-def]  # noqa: E501  # fmt: skip
    """Per slice in [k0, k1): mean, population variance, the spread of the squared deviations
    (:func:`dmlconform.tolerance.normalization._slice_stats`) and the number of distinct values (NaN and inf
    each count as distinct, -0 == +0: :func:`dmlconform.tolerance.repetition`). ``moments_only``:
    the mean and variance only (the spread, the count and ``exact_o`` NaN), for a model that reads
    no more (the RMS model's mean square is var + mean^2). ``exact_o``: 1 where the slice's sums
    in a precision whose exact integers reach ``limit`` are exact in any order, else 0
    (:mod:`dmlconform.tolerance.exact`, decided from the sums of the same pass); the count of
    such a slice NaN unless ``count_exact`` (a model that holds exact slices to their division
    reads no repetition there)."""
    n = m_len * l_len
    acc = np.zeros(LANES)
    acc2 = np.zeros(LANES)
    sums = np.zeros(3 * LANES)
    keys = np.empty(0 if moments_only else n, np.uint32)
    tmp = np.empty(n if n > SMALL_SORT and not moments_only else 0, np.uint32)
    bitmap = np.zeros(0 if moments_only else 1 << (DIRECT_BITS - 6), np.uint64)
    for k in range(k0, k1):
        shift = np.float64(x[k * x_sk])
        mean, var, corr = _centered_stats(x, k, x_sk, x_sm, m_len, l_len, shift, acc, acc2)
        if corr * corr > SHIFT_LIMIT * var or not (shift == shift and abs(shift) < math.inf):
            mean, var, corr = _centered_stats(x, k, x_sk, x_sm, m_len, l_len, mean, acc, acc2)
        if var < 0.0:
            var = 0.0
        mean_o[k - k0] = mean
        var_o[k - k0] = var
        if moments_only:
            sqstd_o[k - k0] = math.nan
            distinct_o[k - k0] = math.nan
            exact_o[k - k0] = math.nan
            continue
        acc[:] = 0.0
        sums[:] = 0.0
        lo = np.int64(0xFFFFFFFF)
        hi = np.int64(0)
        nonfinite = np.int64(0)
        for m in range(m_len):
            start = k * x_sk + m * x_sm
            lo, hi, nonfinite = _spread_and_keys(
                x[start : start + l_len], x_bits[start : start + l_len], mean, var, half, acc, sums, keys,
                m * l_len, lo, hi, nonfinite,
            )  # fmt: skip
        exact = exact_slice(x_bits, k, x_sk, x_sm, m_len, l_len, sums, limit)
        exact_o[k - k0] = 1.0 if exact else 0.0
        sqstd_o[k - k0] = math.sqrt(_lane_total(acc) / n)
        if exact and not count_exact:
            distinct_o[k - k0] = math.nan
            continue
        nk = n
        if nonfinite > 0:  # NaN and inf each count as distinct: leave them out of the keys
            nk = 0
            for m in range(m_len):
                start = k * x_sk + m * x_sm
                for j in range(l_len):
                    if abs(x[start + j]) < math.inf:
                        bits = x_bits[start + j]
                        keys[nk] = np.uint32((ordinal16(bits) if half else ordinal32(bits)) + 2147483648)
                        nk += 1
        distinct_o[k - k0] = count_distinct(keys, nk, lo, hi, tmp, bitmap) + nonfinite


# columns of gradient_sums' output: per work item, over its elements (c the centre, M the Mean), in
# the order of the fields of dmlconform.tolerance.gradients.GradientSums
G_ABS_DY, G_ABS_DY_XM, G_DY_XC, G_ABS_DY_XC, G_ABS_X, G_MAX_XC = range(6)
N_GRADIENT_SUMS = 6

_GRAD_SIG = _sig(
    "f4[]", "i8", "i8", "f4[]", "i8", "i8", "i8[]", "i8[]", "i8[]", "i8", "f8[]", "f8[]", "f8[:,]"
)


@njit(cache=True)
def _gradient_terms(xv, dv, mean, centre, lanes, t):  # type: ignore[no-untyped-def]
    """Add one element's terms to lane ``t`` of each sum (rows of ``lanes``)."""
    xc = xv - centre
    p = dv * xc
    lanes[G_ABS_DY, t] += abs(dv)
    lanes[G_ABS_DY_XM, t] += abs(dv * (xv - mean))
    lanes[G_DY_XC, t] += p
    lanes[G_ABS_DY_XC, t] += abs(p)
    lanes[G_ABS_X, t] += abs(xv)
    lanes[G_MAX_XC, t] = vmax(lanes[G_MAX_XC, t], abs(xc))


@njit(_GRAD_SIG, cache=True, nogil=True, error_model="numpy")
def gradient_sums(x, x_sk, x_sm, dy, d_sk, d_sm, item_k, item_p0, item_p1, l_len, mean_k, centre_k, out):  # type: ignore[no-untyped-def]  # noqa: E501
    """The per-slice sums the gradients' model reads, per work item (elements [item_p0[i],
    item_p1[i]) of slice item_k[i]; the glue merges a slice's items): sum |dy|, sum |dy (x - M)|,
    sum dy (x - c), sum |dy (x - c)|, sum |x| and max |x - c|, M the Mean member and c the
    centre of the input gradient (the Mean member, or the batch mean), both per slice. Lane sums
    (lane: position within a block of LANES) combined by a fixed pairwise tree, as the
    reference's; max propagates NaN as np.max."""
    lanes = np.zeros((N_GRADIENT_SUMS, LANES))
    for i in range(item_k.size):
        k = item_k[i]
        p0 = item_p0[i]
        p1 = item_p1[i]
        mean = mean_k[k]
        centre = centre_k[k]
        lanes[:] = 0.0
        for m in range(p0 // l_len, (p1 - 1) // l_len + 1):
            j_lo = max(p0 - m * l_len, 0)
            j_hi = min(p1 - m * l_len, l_len)
            xs = k * x_sk + m * x_sm
            ds = k * d_sk + m * d_sm
            nb = (j_hi - j_lo) // LANES
            for blk in range(nb):
                j0 = j_lo + blk * LANES
                for t in range(LANES):
                    _gradient_terms(
                        np.float64(x[xs + j0 + t]), np.float64(dy[ds + j0 + t]), mean, centre, lanes, t
                    )
            for j in range(j_lo + nb * LANES, j_hi):
                t = j - j_lo - nb * LANES
                _gradient_terms(np.float64(x[xs + j]), np.float64(dy[ds + j]), mean, centre, lanes, t)
        for c in range(G_MAX_XC):
            out[i, c] = _lane_total(lanes[c].copy())
        top = lanes[G_MAX_XC, 0]
        for t in range(1, LANES):
            top = fmax(top, lanes[G_MAX_XC, t])
        out[i, G_MAX_XC] = top


# ---------------------------------------------------------------------------------------------
# Per-element budget and comparison


BLOCK = 256
"""Elements per block of the element pass: the block's per-element terms live in arrays of this
length (L1-resident), and every running figure has one lane per block position."""

# rows of the element pass's work array (judge_normalization): the block's terms, then the lanes
W_S, W_B, W_A, W_M, W_IS, W_EA, W_SL, W_EX, W_BUD, W_RATIO, W_BUDGET, W_Y, W_BEND = range(13)
W_AA, W_BB, W_CC, W_DD, W_EE, W_D2, W_RB2, W_ROUND2, W_BEND2 = range(13, 22)
W_ROWS = 22


@njit(cache=True, error_model="numpy")
def _activation_block(wk, cnt, act, pa, pb, act_ulps, u, canc, canc_ops, canc_consts, branch, sides,
                      curved_from, curvature_rtol):  # type: ignore[no-untyped-def]  # fmt: skip
    """A block's terms under a fused activation: from each element's value before it (row W_Y)
    and that value's error (W_EA), the error after it (into W_EA), its slope (W_SL), whether
    the aggregate fit excludes it (W_EX) and its bend over the interval (W_BEND, as
    :func:`dmlconform.tolerance.normalization._through_activation`). Scalar code (the
    activations branch per formula), called once per block: called per element, its array
    arguments' reference counting and the returned tuple cost more than a cheap activation
    (RELU's pass ran at 53 ns per element against 13 without one); inlined into each copy of
    the element loop, its five ``activate``s made the cold compile of this module 1.3x longer."""
    stack = np.empty(16)
    for tt in range(cnt):
        t = np.uint64(tt)
        y = wk[np.uint64(W_Y * BLOCK) + t]
        e_y = wk[np.uint64(W_EA * BLOCK) + t]
        f = activate(act, y, pa, pb)
        lo = activate(act, y - e_y, pa, pb)
        hi = activate(act, y + e_y, pa, pb)
        e_act = fmax(abs(lo - f), abs(hi - f))
        slope = (hi - lo) / (2.0 * e_y) if e_y > 0.0 else 1.0
        bend = abs(hi + lo - 2.0 * f) / 2.0
        bend = bend if abs(bend) < math.inf else 0.0
        jump = 0.0
        for b in range(branch.size):
            if abs(y - branch[b]) <= e_y:
                side = fmax(fmax(abs(sides[b, 0] - f), abs(sides[b, 1] - f)), abs(sides[b, 2] - f))
                jump = fmax(jump, side)
        excluded = jump > 0.0
        if abs(e_y) < math.inf and e_y > curved_from:
            ew = e_y / 16.0
            near = (activate(act, y + ew, pa, pb) - activate(act, y - ew, pa, pb)) / (2.0 * ew)
            up = (hi - f) / e_y
            down = (f - lo) / e_y
            if abs(slope - near) > curvature_rtol * fmax(abs(slope), abs(near)):
                excluded = True
            if abs(up - down) > curvature_rtol * fmax(abs(up), abs(down)):
                excluded = True
        e_act = fmax(e_act, jump) + act_ulps * u * abs(f)
        if canc_ops.size > 0:
            e_act = e_act + canc * u * abs(run_program(canc_ops, canc_consts, y, stack))
        wk[np.uint64(W_EA * BLOCK) + t] = e_act
        wk[np.uint64(W_SL * BLOCK) + t] = slope
        wk[np.uint64(W_EX * BLOCK) + t] = 1.0 if excluded else 0.0
        wk[np.uint64(W_BEND * BLOCK) + t] = bend


@njit(cache=True)
def _fill_operand(out, at, table, tk, tr, const, k, p, cnt):  # type: ignore[no-untyped-def]
    """The block's values of an operand that varies within the slice into ``out[at : at + cnt]``
    (a constant one is filled once per item: :func:`_fill_constant`)."""
    if not const:
        row = np.uint64(at)
        for t in range(cnt):
            out[row + np.uint64(t)] = table[tk[k], tr[np.uint64(p + t)]]


@njit(cache=True)
def _fill_constant(out, at, table, tk, const, k):  # type: ignore[no-untyped-def]
    """A whole row of ``out`` with the slice's value of an operand constant within it."""
    if const:
        out[at : at + BLOCK] = table[tk[k], 0]


@njit(cache=True)
def _fill_constants(wk, operands, k):  # type: ignore[no-untyped-def]
    """The rows of the operands constant within slice ``k`` (Scale, Bias, FusedAdd, the centre
    and 1 / sd: ``operands`` as :func:`judge_normalization` takes them), once per item."""
    sc, sc_k, _, sc_const, bi, bi_k, _, bi_const, ad, ad_k, _, ad_const = operands[:12]
    mo, mo_k, _, mo_const, iv, iv_k, _, iv_const = operands[12:]
    _fill_constant(wk, W_S * BLOCK, sc, sc_k, sc_const, k)
    _fill_constant(wk, W_B * BLOCK, bi, bi_k, bi_const, k)
    _fill_constant(wk, W_A * BLOCK, ad, ad_k, ad_const, k)
    _fill_constant(wk, W_M * BLOCK, mo, mo_k, mo_const, k)
    _fill_constant(wk, W_IS * BLOCK, iv, iv_k, iv_const, k)


@njit(cache=True)
def _fill_operands(wk, operands, k, pb0, cnt):  # type: ignore[no-untyped-def]
    """The block's values of the operands that vary within the slice (at slice positions
    [pb0, pb0 + cnt)) into their rows."""
    sc, sc_k, sc_r, sc_const, bi, bi_k, bi_r, bi_const, ad, ad_k, ad_r, ad_const = operands[:12]
    mo, mo_k, mo_r, mo_const, iv, iv_k, iv_r, iv_const = operands[12:]
    _fill_operand(wk, W_S * BLOCK, sc, sc_k, sc_r, sc_const, k, pb0, cnt)
    _fill_operand(wk, W_B * BLOCK, bi, bi_k, bi_r, bi_const, k, pb0, cnt)
    _fill_operand(wk, W_A * BLOCK, ad, ad_k, ad_r, ad_const, k, pb0, cnt)
    _fill_operand(wk, W_M * BLOCK, mo, mo_k, mo_r, mo_const, k, pb0, cnt)
    _fill_operand(wk, W_IS * BLOCK, iv, iv_k, iv_r, iv_const, k, pb0, cnt)


@njit(cache=True)
def _pre_activation(wk, t, xv, e_w, slice_terms, pointwise):  # type: ignore[no-untyped-def]
    """One element's error before a fused activation (e_y, under the ceiling where the model
    has one) into row W_EA and its value y into W_Y (:class:`dmlconform.tolerance.judge.SliceTerms`'
    formulas), ``e_w`` its weight's term. ``slice_terms``: (e_mean, rel_sd, c_dev, d_shift,
    d_rel, unit) of the slice; ``pointwise``: (c_pt u, z_rounds, dev_folded, ceiling,
    has_ceiling)."""
    e_mean, rel_sd, c_dev, d_shift, d_rel, unit = slice_terms
    cu, z_rounds, dev_folded, ceiling, has_ceiling = pointwise
    s = wk[np.uint64(W_S * BLOCK) + t]
    b = wk[np.uint64(W_B * BLOCK) + t]
    a = wk[np.uint64(W_A * BLOCK) + t]
    mean = wk[np.uint64(W_M * BLOCK) + t]
    inv_sd = wk[np.uint64(W_IS * BLOCK) + t]
    xc = xv - mean
    z = xc * inv_sd
    dev = (abs(xv) + abs(mean)) if dev_folded else abs(xc)
    e_dev = c_dev * dev if c_dev != 0.0 else 0.0
    e_z = (e_mean + e_dev + e_w) * inv_sd + abs(z) * rel_sd
    e_y = abs(s) * e_z + cu * ((abs(s * z) if z_rounds else 0.0) + abs(b) + abs(a))
    e_floor = e_y - abs(s) * (d_shift + abs(z) * d_rel)
    cap = ceiling * (abs(s) * vmax(unit, abs(z)) + abs(b) + abs(a)) + e_floor
    wk[np.uint64(W_EA * BLOCK) + t] = vmin(e_y, cap) if has_ceiling else e_y
    wk[np.uint64(W_Y * BLOCK) + t] = s * z + b + a


@njit(cache=True)
def _element_budget(e_act, rv, ulp_scale, output_ulps, atol, fmax_out, half):  # type: ignore[no-untyped-def]
    """:func:`dmlconform.tolerance.terms.with_output_rounding` of one element: the output's
    spacing where the error may take the reference (short of its largest finite value);
    unbounded where e_act is."""
    reach = vmin(abs(rv) + e_act, fmax_out)
    budget = ulp_scale * (e_act + output_ulps * spacing(reach, half)) + atol
    return math.inf if e_act == math.inf else budget


@njit(cache=True)
def _ulp_distance(g_bits, r_bits, g_nan, r_nan, half):  # type: ignore[no-untyped-def]
    """:func:`dmlconform.tolerance.terms.ulp_distance` of one element, from both values' bits:
    inf where one only is NaN, 0 where both are."""
    od = (ordinal16(g_bits) - ordinal16(r_bits)) if half else (ordinal32(g_bits) - ordinal32(r_bits))
    ulps = np.float64(abs(od))
    ulps = math.inf if g_nan ^ r_nan else ulps
    return 0.0 if g_nan & r_nan else ulps


@njit(cache=True)
def _error_and_judging_budget(gv, rv, g_nan, r_nan, budget, fmax_out, edge_out):  # type: ignore[no-untyped-def]
    """(err, judged): one element's absolute error (0 where the answer counts as the reference
    itself, inf where it is NaN) and the budget it is held to (:func:`dmlconform.tolerance.compare`'s
    ``_element_errors`` and ``_judging_budgets``)."""
    err = abs(gv - rv)
    err = math.inf if err != err else err
    # a finite reference whose budget reaches the values that round to inf: the
    # backend's inf of its sign is within it (tolerance.overflow_within)
    over = (abs(gv) == math.inf) & (gv * rv > 0.0) & (abs(rv) + budget >= edge_out)
    err = 0.0 if (gv == rv) | (g_nan & r_nan) | over else err
    # overflowed in the reference: only that inf or the largest finite value of
    # its sign is right (tolerance.overflowed_alike); anything else errs unbounded
    r_inf = (abs(rv) == math.inf) & (err != 0.0)
    alike = (gv * rv > 0.0) & (abs(gv) >= fmax_out)
    judged = 0.0 if r_inf & (not alike) else budget
    err = (0.0 if alike else math.inf) if r_inf else err
    return err, judged


@njit(cache=True)
def _ratio(err, judged, ulps, rv, max_ulp, inv_max_ulp, use_max_ulp):  # type: ignore[no-untyped-def]
    """(ratio, failing): one element's error over its budget (in ULP under a fixed ``max_ulp``;
    0 without error or under an unbounded budget, inf where undefined) and whether it exceeds it."""
    if use_max_ulp:
        ratio = 0.0 if ulps == 0.0 else ulps * inv_max_ulp
        failing = ulps > max_ulp
    else:
        ratio = err / judged
        ratio = math.inf if ratio != ratio else ratio
        ratio = 0.0 if (err == 0.0) | ((judged == math.inf) & (abs(rv) < math.inf)) else ratio
        failing = err > judged
    return ratio, failing


@njit(cache=True)
def _fit_residual(w, z, xv, mean, inv_sd, budget, e_act, fit):  # type: ignore[no-untyped-def]
    """The bound of one element's pointwise rounding in the aggregate fit (``AggregateModel``'s
    ``residual``): its budget less its statistics part, plus the rounding of an implementation
    that folds the affine map. ``fit``: (e_mean, rel_sd, c_pt u)."""
    e_mean, rel_sd, cu = fit
    statistic_part = abs(w) * (e_mean * inv_sd + abs(z) * rel_sd)
    folded = cu * abs(w) * ((abs(xv) + abs(mean)) * inv_sd)
    # (on usable elements every term is finite: no NaN to propagate)
    return budget - min(statistic_part, e_act) + folded


@njit(cache=True)
def _spacing_exact(bits, half):  # type: ignore[no-untyped-def]
    """:func:`spacing` of a value of the output type from its float32 bits."""
    mag = np.int64(bits) & 0x7FFFFFFF
    return spacing16_exact(mag) if half else spacing32_exact(mag)


@njit(cache=True)
def _add_fit_terms(wk, t, w, z, d, residual, aligned, usable):  # type: ignore[no-untyped-def]
    """Add one element's terms of the aggregate fit's sums (tolerance.FIT_SUMS) into lane ``t``
    of their rows, zeros where it is not usable; 1 if it counts (a weight not 0), else 0.
    ``aligned``: (the output rounding, the activation's bend), what may line up with z."""
    rounding, bend = aligned
    w = w if usable else 0.0
    wz = w * z if usable else 0.0
    d = d if usable else 0.0
    residual = residual if usable else 0.0
    rounding = rounding if usable else 0.0
    bend = bend if usable else 0.0
    wk[np.uint64(W_AA * BLOCK) + t] += w * w
    wk[np.uint64(W_BB * BLOCK) + t] += w * wz
    wk[np.uint64(W_CC * BLOCK) + t] += wz * wz
    wk[np.uint64(W_DD * BLOCK) + t] += w * d
    wk[np.uint64(W_EE * BLOCK) + t] += wz * d
    wk[np.uint64(W_D2 * BLOCK) + t] += d * d
    wk[np.uint64(W_RB2 * BLOCK) + t] += residual * residual
    wk[np.uint64(W_ROUND2 * BLOCK) + t] += rounding * rounding
    wk[np.uint64(W_BEND2 * BLOCK) + t] += bend * bend
    return np.int64(w != 0.0)


@njit(cache=True)
def _first_at(wk, cnt, bits):  # type: ignore[no-untyped-def]
    """The first block position whose ratio has these bits (the block's largest: np.argmax's
    choice among equal maxima), -1 if none has."""
    for tt in range(cnt):
        if wk[W_RATIO * BLOCK + tt] == np.int64(bits).view(np.float64):
            return tt
    return -1


@njit(cache=True)
def _store_figures(f_i, wk, best, maxima, counts):  # type: ignore[no-untyped-def]
    """An item's figures (F_* columns) into ``f_i``: its worst element ``best`` (ratio bits,
    position, got, ref, budget), ``maxima`` (bits of the largest ULP distance and error),
    ``counts`` (failing, usable by the fit) and the lanes' sums."""
    best_bits, best_pos, best_got, best_ref, best_budget = best
    ulp_bits, abs_bits = maxima
    n_fail, n_count = counts
    lanes = wk.reshape(W_ROWS, BLOCK)
    f_i[F_RATIO] = np.int64(best_bits).view(np.float64) if best_bits >= 0 else -1.0
    f_i[F_POS] = best_pos
    f_i[F_ULP] = np.int64(ulp_bits).view(np.float64)
    f_i[F_ABS] = np.int64(abs_bits).view(np.float64)
    f_i[F_FAIL] = n_fail
    f_i[F_GOT] = best_got
    f_i[F_REF] = best_ref
    f_i[F_BUDGET] = best_budget
    f_i[F_COUNT] = n_count
    for col, row in ((F_AA, W_AA), (F_BB, W_BB), (F_CC, W_CC), (F_DD, W_DD), (F_EE, W_EE), (F_D2, W_D2),
                     (F_RB2, W_RB2), (F_ROUND2, W_ROUND2), (F_BEND2, W_BEND2)):  # fmt: skip
        f_i[col] = _lane_total(lanes[row].copy())


@njit(cache=True)
def _block_starts(k, m, c0, strides):  # type: ignore[no-untyped-def]
    """Where the block at position ``c0`` of row ``m`` of slice ``k`` starts in the input, the
    weight, the answer and the reference (unsigned flat indices)."""
    x_sk, x_sm, w_sk, w_sm, g_sk, g_sm, r_sk, r_sm = strides
    xb = np.uint64(k * x_sk + m * x_sm + c0)
    wb = np.uint64(k * w_sk + m * w_sm + c0)
    gb = np.uint64(k * g_sk + m * g_sm + c0)
    rb = np.uint64(k * r_sk + m * r_sm + c0)
    return xb, wb, gb, rb


@njit(cache=True)
def _element_terms(wk, t, xv):  # type: ignore[no-untyped-def]
    """One element's terms from the block's rows: (Scale, the centre, 1 / sd, z, e_act, the
    activation's slope, whether the fit leaves it out)."""
    s = wk[np.uint64(W_S * BLOCK) + t]
    mean = wk[np.uint64(W_M * BLOCK) + t]
    inv_sd = wk[np.uint64(W_IS * BLOCK) + t]
    xc = xv - mean
    z = xc * inv_sd
    e_act = wk[np.uint64(W_EA * BLOCK) + t]
    slope = wk[np.uint64(W_SL * BLOCK) + t]
    excluded = wk[np.uint64(W_EX * BLOCK) + t] != 0.0
    # a zero divisor (sqrt(0)): the docs leave the value undefined
    e_act = math.inf if inv_sd == math.inf else e_act
    return s, mean, inv_sd, z, e_act, slope, excluded


@njit(cache=True)
def _usable(d, budget, w, z, excluded, use_max_ulp):  # type: ignore[no-untyped-def]
    """Whether an element enters the aggregate fit: every term finite, not left out, and no
    fixed ULP budget (which replaces the model, the fit with it)."""
    return (
        (abs(d) < math.inf) & (abs(budget) < math.inf) & (abs(w) < math.inf)
        & (abs(z) < math.inf) & (not excluded) & (not use_max_ulp)
    )  # fmt: skip


@njit(cache=True)
def _store_budgets(budget_out, at, wk, cnt):  # type: ignore[no-untyped-def]
    """The block's budgets (row W_BUD) into ``budget_out[at : at + cnt]``."""
    for tt in range(cnt):
        t = np.uint64(tt)  # unsigned indices: no negative-index wraparound per access
        budget_out[at + tt] = wk[np.uint64(W_BUD * BLOCK) + t]


@njit(cache=True, inline="always")
def _judge_items(half, arrays, strides, items, operands, slices, model, output, fig, budget_out):  # type: ignore[no-untyped-def]  # noqa: E501
    """:func:`judge_normalization`'s body; ``half`` a literal where it is called, so that each
    copy holds the code of one output type only (LLVM does not unswitch a loop this large).
    The arguments come in tuples: a call of more than 30 arguments is compiled as ``f(*args)``,
    which numba does not inline."""
    x, weight, got, got_bits, ref, ref_bits = arrays
    item_k, item_p0, item_p1, l_len, n_slice = items
    e_mean_k, rel_sd_k, c_dev_k, d_shift_k, d_rel_k, unit_k = slices
    c_pt, u, c_w, z_rounds, dev_folded, ceiling, act, pa, pb, act_ulps, canc, canc_ops = model[:12]
    canc_consts, branch, sides, curved_from, curvature_rtol = model[12:]
    ulp_scale, output_ulps, atol, max_ulp, use_max_ulp = output
    store = budget_out.size > 0
    has_act = act != 0
    fmax_out = F16_MAX if half else F32_MAX
    edge_out = F16_EDGE if half else F32_EDGE
    inv_max_ulp = 1.0 / max(max_ulp, 1e-300) if use_max_ulp else 0.0
    cu = c_pt * u
    pointwise = (cu, z_rounds, dev_folded, ceiling, ceiling == ceiling)
    # one array holds the block's terms and the lanes (rows of BLOCK at constant offsets): LLVM
    # then sees one object written at distances of BLOCK, and needs no runtime alias checks
    # against each of a dozen arrays, which made it give up vectorizing
    wk = np.zeros(W_ROWS * BLOCK)
    wk[W_SL * BLOCK : (W_SL + 1) * BLOCK] = 1.0
    # One fused pass: each element is read from memory once, and its terms, budget, error, ratio
    # and fit terms stay in registers from step to step. The steps are small compiled helpers
    # that LLVM inlines (the same float operations in the same order; no fastmath), given no
    # array they would read under a condition (an array passed in costs a reference count there,
    # which kept LLVM from vectorizing the loop). They are not numba inline="always": numba
    # then types every copy of each helper again, and this module's cold compile took 63 s
    # against 32 s (bench/bench_coldstart.py --judge), for the same speed and the same figures.
    for i in range(item_k.size):
        k = item_k[i]
        p0 = item_p0[i]
        p1 = item_p1[i]
        slice_terms = (e_mean_k[k], rel_sd_k[k], c_dev_k[k], d_shift_k[k], d_rel_k[k], unit_k[k])
        fit = (e_mean_k[k], rel_sd_k[k], cu)
        _fill_constants(wk, operands, k)
        wk[W_AA * BLOCK :] = 0.0
        best_bits = np.int64(-1)  # below every ratio's bits (ratios are >= 0)
        best_pos = p0
        best_got = best_ref = best_budget = 0.0
        ulp_bits = abs_bits = np.int64(0)
        n_fail = n_count = np.int64(0)
        for m in range(p0 // l_len, (p1 - 1) // l_len + 1):
            j_lo = max(p0 - m * l_len, 0)
            j_hi = min(p1 - m * l_len, l_len)
            for c0 in range(j_lo, j_hi, BLOCK):
                cnt = min(BLOCK, j_hi - c0)
                pb0 = m * l_len + c0
                xb, wb, gb, rb = _block_starts(k, m, c0, strides)
                _fill_operands(wk, operands, k, pb0, cnt)
                for tt in range(cnt):  # e_y into W_EA, y into W_Y (vectorized)
                    t = np.uint64(tt)  # unsigned indices: no negative-index wraparound per access
                    e_w = c_w * abs(np.float64(weight[wb + t])) if c_w != 0.0 else 0.0
                    _pre_activation(wk, t, np.float64(x[xb + t]), e_w, slice_terms, pointwise)
                if has_act:  # e_act, slope and exclusion from y and e_y
                    _activation_block(
                        wk, cnt, act, pa, pb, act_ulps, u, canc, canc_ops, canc_consts, branch, sides,
                        curved_from, curvature_rtol,
                    )  # fmt: skip
                # the branch-free part: budget, comparison, running figures
                top_bits = np.int64(-1)
                for tt in range(cnt):
                    t = np.uint64(tt)  # unsigned indices: no negative-index wraparound per access
                    xv = np.float64(x[xb + t])
                    s, mean, inv_sd, z, e_act, slope, excluded = _element_terms(wk, t, xv)
                    rv = np.float64(ref[rb + t])
                    gv = np.float64(got[gb + t])
                    budget = _element_budget(e_act, rv, ulp_scale, output_ulps, atol, fmax_out, half)
                    wk[np.uint64(W_BUD * BLOCK) + t] = budget
                    g_nan, r_nan = gv != gv, rv != rv
                    ulps = _ulp_distance(got_bits[gb + t], ref_bits[rb + t], g_nan, r_nan, half)
                    err, judged = _error_and_judging_budget(gv, rv, g_nan, r_nan, budget, fmax_out, edge_out)
                    ratio, failing = _ratio(err, judged, ulps, rv, max_ulp, inv_max_ulp, use_max_ulp)
                    # per element: its ratio and judging budget (unconditional stores); the
                    # maxima and counts as integer reductions (a non-negative float's bits order
                    # as it does), which vectorize where a float max or a conditional store
                    # (a masked scatter) would not
                    wk[np.uint64(W_RATIO * BLOCK) + t] = ratio
                    wk[np.uint64(W_BUDGET * BLOCK) + t] = judged
                    top_bits = max(top_bits, np.float64(ratio).view(np.int64))
                    ulp_bits = max(ulp_bits, np.float64(ulps).view(np.int64))
                    abs_bits = max(abs_bits, np.float64(err).view(np.int64))
                    n_fail += np.int64(failing)
                    # the aggregate fit's sums (tolerance.FIT_SUMS) over the usable elements
                    d = gv - rv
                    w = s * slope
                    usable = _usable(d, budget, w, z, excluded, use_max_ulp)
                    residual = _fit_residual(w, z, xv, mean, inv_sd, budget, e_act, fit)
                    rounding = output_ulps * _spacing_exact(ref_bits[rb + t], half)
                    bend = wk[np.uint64(W_BEND * BLOCK) + t]
                    n_count += _add_fit_terms(wk, t, w, z, d, residual, (rounding, bend), usable)
                at = _first_at(wk, cnt, top_bits) if top_bits > best_bits else -1
                if at >= 0:  # a new worst element: the first of the block's largest
                    best_bits = top_bits
                    best_pos = pb0 + at
                    best_got = np.float64(got[gb + np.uint64(at)])
                    best_ref = np.float64(ref[rb + np.uint64(at)])
                    best_budget = wk[W_BUDGET * BLOCK + at]
                if store:
                    _store_budgets(budget_out, k * n_slice + pb0, wk, cnt)
        best = (best_bits, best_pos, best_got, best_ref, best_budget)
        _store_figures(fig[i], wk, best, (ulp_bits, abs_bits), (n_fail, n_count))


@njit(_JUDGE_SIG, cache=True, nogil=True, error_model="numpy")
def judge_normalization(  # type: ignore[no-untyped-def]  # noqa: C901 - one pass, every term of the model
    x, x_sk, x_sm, weight, w_sk, w_sm,
    got, got_bits, g_sk, g_sm,
    ref, ref_bits, r_sk, r_sm,
    item_k, item_p0, item_p1, l_len, n_slice,
    sc, sc_k, sc_r, sc_const, bi, bi_k, bi_r, bi_const, ad, ad_k, ad_r, ad_const,
    mo, mo_k, mo_r, mo_const, iv, iv_k, iv_r, iv_const,
    e_mean_k, rel_sd_k, c_dev_k, d_shift_k, d_rel_k, unit_k,
    c_pt, u, c_w, z_rounds, dev_folded, ceiling, act, pa, pb, act_ulps, canc, canc_ops, canc_consts,
    branch, sides, curved_from, curvature_rtol,
    half, ulp_scale, output_ulps, atol, max_ulp, use_max_ulp,
    fig, budget_out,
):  # fmt: skip
    """A normalization model (the centred one, :func:`dmlconform.tolerance.budgets`, or one that
    reads the same terms: :class:`dmlconform.tolerance.judge.SliceTerms`) and the comparison of the
    main output over work items: item ``i`` is elements [item_p0[i], item_p1[i]) (in slice
    order) of slice item_k[i], and ``fig[i]`` gets its figures (F_* columns; the glue merges
    the items of a slice). ``budget_out`` (empty, or ``n_slice`` float64 per slice in slice
    order) receives the budgets.

    Why blocks: the pass runs over runs of at most BLOCK elements of a row. Per block, the
    operands are gathered into a work array, the error before rounding (e_act: a fused
    activation's terms are scalar code, one formula per branch) is computed into it, and then
    one branch-free loop (selects, register bit casts, unsigned indices) computes every
    element's budget, error and ratio, which LLVM vectorizes: it stores each ratio and judging
    budget, keeps the largest ratio, ULP distance and error as integer maxima of their bits
    (non-negative floats order as their bits do), counts the failing elements and adds the
    aggregate fit's terms into lane sums (lane t: block position t; combined by a fixed pairwise
    tree per item). Only a block whose largest ratio beats the item's worst so far is scanned
    for its first such element, which keeps np.argmax's choice (the first of equal maxima)."""
    a0, a1, a2, a3, a4, a5, a6 = (
        (x, weight, got, got_bits, ref, ref_bits),
        (x_sk, x_sm, w_sk, w_sm, g_sk, g_sm, r_sk, r_sm),
        (item_k, item_p0, item_p1, l_len, n_slice),
        (sc, sc_k, sc_r, sc_const, bi, bi_k, bi_r, bi_const, ad, ad_k, ad_r, ad_const,
         mo, mo_k, mo_r, mo_const, iv, iv_k, iv_r, iv_const),
        (e_mean_k, rel_sd_k, c_dev_k, d_shift_k, d_rel_k, unit_k),
        (c_pt, u, c_w, z_rounds, dev_folded, ceiling, act, pa, pb, act_ulps, canc, canc_ops, canc_consts, branch, sides,
         curved_from, curvature_rtol),
        (ulp_scale, output_ulps, atol, max_ulp, use_max_ulp),
    )  # fmt: skip
    if half:
        _judge_items(True, a0, a1, a2, a3, a4, a5, a6, fig, budget_out)
    else:
        _judge_items(False, a0, a1, a2, a3, a4, a5, a6, fig, budget_out)
