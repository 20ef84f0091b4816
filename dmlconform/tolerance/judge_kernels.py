"""The judge's compiled kernels: slice statistics and the per-element budget + comparison pass.

Why compiled: the numpy model (:mod:`dmlconform.tolerance`, :mod:`dmlconform.tolerance.models`)
builds dozens of tensor-sized float64 temporaries per case (about 150 bytes per element) and
costs 400-800x the reference at n = 2^22. Here every per-element quantity lives in registers:

- :func:`slice_statistics` reads each slice twice: its mean and variance (the reference kernel's
  shifted sums, :func:`dmlconform.reference.kernels._centered_stats`), then the spread of the
  squared deviations and the slice's values as ordinal keys, whose distinct count gives the
  repetition ``r`` (radix buckets and a bitmap: no sort of the slice);
- the per-slice terms of the model (growth, e_mean, e_var, ...) are computed by the numpy
  model's own functions on these (K,) arrays, so they are the same code;
- :func:`judge_normalization` and :func:`judge_pointwise` compute each element's budget and
  error, reduce them to per-slice figures (worst ratio and where, max ULP, max abs error,
  failing count, the aggregate fit's sums) and store nothing per element unless asked to (the
  tests ask for the budgets to hold them against the numpy model).

Slices are addressed as in the reference kernel (``x[k * sk + m * sm + j]``, kernel dims
(K, M, L)); operands arrive factorized (``T[tk[k], tr[r]]``). Kernels take a slice range
``[k0, k1)`` so that the glue runs chunks on the reference's thread pool (nogil).

Semantics mirror numpy's where it matters for equality with the model: NaN propagates through
``np.maximum``/``np.minimum`` (:func:`_fmax`, :func:`_fmin`), ``np.where(e > 0, ..., 1.0)`` is
false for NaN, the first strict maximum wins (np.argmax), and a NaN ratio is +inf.
"""

from __future__ import annotations

import math

import numpy as np
from numba import njit, types

from dmlconform.reference.kernels import LANES, SHIFT_LIMIT, _centered_stats, _lane_total, activate

# figure columns of the per-slice output (see judge_normalization)
F_RATIO, F_POS, F_ULP, F_ABS, F_FAIL, F_GOT, F_REF, F_BUDGET = range(8)
F_AA, F_BB, F_CC, F_DD, F_EE, F_COUNT, F_D2, F_RB2, F_ROUND2 = range(8, 17)
N_FIGURES = 17

SMALL_SORT = 1024  # slices with at most this many finite keys are sorted, not bucketed
BUCKET_BITS = 21  # one bucket's keys span 2^21 values: a 256 KiB bitmap, in cache
DIRECT_BITS = 22  # a slice whose keys span at most 2^22 values uses one bitmap directly


@njit(cache=True, inline="always")
def _fmax(a, b):  # type: ignore[no-untyped-def]
    """np.maximum: NaN if either is NaN."""
    if a != a or b != b:
        return a + b
    return a if a >= b else b


@njit(cache=True, inline="always")
def _fmin(a, b):  # type: ignore[no-untyped-def]
    if a != a or b != b:
        return a + b
    return a if a <= b else b


@njit(cache=True, inline="always")
def half_ordinal(bits):  # type: ignore[no-untyped-def]
    """The signed magnitude of a float16 value's bits, from the bits of the same value as a
    float32 (exactly representable): adjacent float16 values differ by 1, -0 == +0."""
    mag = bits & 0x7FFFFFFF
    e = (mag >> 23) - 127
    if mag >= 0x7F800000:  # inf (NaN is handled by the caller)
        h = 0x7C00
    elif e >= -14:
        h = ((e + 15) << 10) | ((mag & 0x7FFFFF) >> 13)
    elif mag == 0:
        h = 0
    else:  # a float16 subnormal: an integer multiple of 2^-24
        m = (mag & 0x7FFFFF) | 0x800000
        h = m >> (-1 - e)  # value = m 2^(e - 23) = h 2^-24 (exact: a float16 value)
    return -h if bits < 0 else h


@njit(cache=True, inline="always")
def float_ordinal(bits, half):  # type: ignore[no-untyped-def]
    """:func:`dmlconform.tolerance.ordinal` of one float32 (or float16 held as float32) value."""
    if half:
        return np.int64(half_ordinal(bits))
    b = np.int64(bits)
    if b < 0:
        return np.int64(-2147483648) - b
    return b


@njit(cache=True, inline="always")
def _binade(r, word, bits):  # type: ignore[no-untyped-def]
    """2^floor(log2 r) for a normal positive float64 ``r``, by its exponent bits (``word`` and
    ``bits`` are one float64 / int64 of the same memory: a scalar bit cast; math.frexp and
    math.ldexp cost 9 ns an element, most of the pass)."""
    word[0] = r
    bits[0] = bits[0] & np.int64(0x7FF0000000000000)
    return word[0]


@njit(cache=True, inline="always")
def spacing_of(v, half, word, bits):  # type: ignore[no-untyped-def]
    """:func:`dmlconform.tolerance.ulp_of`: the spacing of the output type at |v|, after
    rounding |v| to that type (round to nearest even), as float64. inf at the largest finite
    value (numpy's ``spacing``), NaN for NaN."""
    a = abs(v)
    if a != a:
        return a
    if not half:
        r = np.float64(np.float32(a))
        if r >= 3.4028234663852886e38:
            return math.inf
        if r < 1.1754943508222875e-38:
            return 1.401298464324817e-45
        return _binade(r, word, bits) * 1.1920928955078125e-07  # 2^-23
    # float16: 11 significant bits, subnormal quantum 2^-24, largest 65504
    if a >= 65520.0:
        return math.inf
    q = 5.960464477539063e-08 if a < 6.103515625e-05 else _binade(a, word, bits) * 9.765625e-04
    r = np.round(a / q) * q
    if r >= 65504.0:
        return math.inf
    if r < 6.103515625e-05:
        return 5.960464477539063e-08
    return _binade(r, word, bits) * 9.765625e-04  # 2^-10


@njit(cache=True, inline="always")
def run_program(ops, consts, x):  # type: ignore[no-untyped-def]
    """Evaluate a spec expression compiled to postfix (:mod:`dmlconform.tolerance.judge`): 0 push
    const, 1 push x, 2 +, 3 -, 4 *, 5 /, 6 negate, 7 abs, 8 max (NaN-propagating)."""
    stack = np.empty(16)
    top = 0
    for i in range(ops.size):
        op = ops[i]
        if op == 0:
            stack[top] = consts[i]
            top += 1
        elif op == 1:
            stack[top] = x
            top += 1
        elif op == 6:
            stack[top - 1] = -stack[top - 1]
        elif op == 7:
            stack[top - 1] = abs(stack[top - 1])
        else:
            b = stack[top - 1]
            a = stack[top - 2]
            top -= 1
            if op == 2:
                stack[top - 1] = a + b
            elif op == 3:
                stack[top - 1] = a - b
            elif op == 4:
                stack[top - 1] = a * b
            elif op == 5:
                stack[top - 1] = a / b
            else:
                stack[top - 1] = _fmax(a, b)
    return stack[0]


# ---------------------------------------------------------------------------------------------
# Statistics


@njit(cache=True)
def _count_distinct(keys, nk, tmp, bitmap):  # type: ignore[no-untyped-def]
    """How many distinct values ``keys[:nk]`` (uint32) holds; destroys the order of ``keys``."""
    if nk == 0:
        return 0
    if nk <= SMALL_SORT:
        part = keys[:nk]
        part.sort()
        count = 1
        for i in range(1, nk):
            if part[i] != part[i - 1]:
                count += 1
        return count
    lo = keys[0]
    hi = keys[0]
    for i in range(nk):
        v = keys[i]
        if v < lo:
            lo = v
        if v > hi:
            hi = v
    span = np.int64(hi) - np.int64(lo) + 1
    if span <= (1 << DIRECT_BITS):
        count = 0
        for i in range(nk):
            off = np.int64(keys[i]) - np.int64(lo)
            w = off >> 6
            bit = np.uint64(1) << np.uint64(off & 63)
            if (bitmap[w] & bit) == 0:
                bitmap[w] |= bit
                count += 1
        for i in range(nk):
            bitmap[(np.int64(keys[i]) - np.int64(lo)) >> 6] = 0
        return count
    # counting sort by the high bits, then one bitmap per bucket
    n_buckets = ((span - 1) >> BUCKET_BITS) + 1
    starts = np.zeros(n_buckets + 1, np.int64)
    for i in range(nk):
        starts[((np.int64(keys[i]) - np.int64(lo)) >> BUCKET_BITS) + 1] += 1
    for b in range(n_buckets):
        starts[b + 1] += starts[b]
    fill = starts[:n_buckets].copy()
    for i in range(nk):
        b = (np.int64(keys[i]) - np.int64(lo)) >> BUCKET_BITS
        tmp[fill[b]] = keys[i]
        fill[b] += 1
    mask = (np.int64(1) << BUCKET_BITS) - 1
    count = 0
    for b in range(n_buckets):
        for i in range(starts[b], starts[b + 1]):
            off = (np.int64(tmp[i]) - np.int64(lo)) & mask
            w = off >> 6
            bit = np.uint64(1) << np.uint64(off & 63)
            if (bitmap[w] & bit) == 0:
                bitmap[w] |= bit
                count += 1
        for i in range(starts[b], starts[b + 1]):
            bitmap[((np.int64(tmp[i]) - np.int64(lo)) & mask) >> 6] = 0
    return count


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
    "f4[]", "i4[]", "i8", "i8", "i8", "i8", "i8", "i8", "b1", "f8[:]", "f8[:]", "f8[:]", "f8[:]"
)
_OPERAND = ("f8[,]", "i8[]", "i8[]", "b1")
_JUDGE_SIG = _sig(
    "f4[]", "i8", "i8",
    "f4[]", "i4[]", "i8", "i8",
    "f4[]", "i4[]", "i8", "i8",
    "i8[]", "i8[]", "i8[]", "i8", "i8",
    *_OPERAND, *_OPERAND, *_OPERAND,
    "f8[]", "f8[]", "f8[]", "f8[]", "f8[]", "f8[]", "f8[]", "b1[]",
    "f8", "f8", "f8", "i8", "f8", "f8", "f8", "f8", "i8[]", "f8[]",
    "f8[]", "f8[,]", "f8", "f8",
    "b1", "f8", "f8", "f8", "f8", "b1",
    "f8[:,]", "f8[:]",
)  # fmt: skip


@njit(_STATS_SIG, cache=True, nogil=True, error_model="numpy")
def slice_statistics(x, x_bits, x_sk, x_sm, k0, k1, m_len, l_len, half, mean_o, var_o, sqstd_o, distinct_o):  # type: ignore[no-untyped-def]  # noqa: E501
    """Per slice in [k0, k1): mean, population variance, the spread of the squared deviations
    (:func:`dmlconform.tolerance.normalization._slice_stats`) and the number of distinct values (NaN and inf
    each count as distinct, -0 == +0: :func:`dmlconform.tolerance.repetition`)."""
    n = m_len * l_len
    acc = np.zeros(LANES)
    acc2 = np.zeros(LANES)
    keys = np.empty(n, np.uint32)
    tmp = np.empty(n if n > SMALL_SORT else 0, np.uint32)
    bitmap = np.zeros(1 << (DIRECT_BITS - 6), np.uint64)
    for k in range(k0, k1):
        shift = np.float64(x[k * x_sk])
        mean, var, corr = _centered_stats(x, k, x_sk, x_sm, m_len, l_len, shift, acc, acc2)
        if corr * corr > SHIFT_LIMIT * var or not (shift == shift and abs(shift) < math.inf):
            mean, var, corr = _centered_stats(x, k, x_sk, x_sm, m_len, l_len, mean, acc, acc2)
        if var < 0.0:
            var = 0.0
        acc[:] = 0.0
        nk = 0
        nonfinite = 0
        for m in range(m_len):
            start = k * x_sk + m * x_sm
            for j in range(l_len):
                v = np.float64(x[start + j])
                d = v - mean
                q = d * d - var
                acc[j % LANES] += q * q
                if abs(v) < math.inf:
                    keys[nk] = np.uint32(float_ordinal(x_bits[start + j], half) + 2147483648)
                    nk += 1
                else:
                    nonfinite += 1
        mean_o[k - k0] = mean
        var_o[k - k0] = var
        sqstd_o[k - k0] = math.sqrt(_lane_total(acc) / n)
        distinct_o[k - k0] = _count_distinct(keys, nk, tmp, bitmap) + nonfinite


# ---------------------------------------------------------------------------------------------
# Per-element budget and comparison


@njit(cache=True, inline="always")
def _judge_element(
    e_act, gv, rv, gbits, rbits, half, ulp_scale, output_ulps, atol, max_ulp, use_max_ulp, word, bits
):  # type: ignore[no-untyped-def]  # noqa: E501
    """One element's budget (the model's, with the output rounding) and its comparison:
    (budget, the budget that judged it, error, ULP distance, ratio, failing)."""
    # with_output_rounding
    reach = _fmin(abs(rv) + e_act, 6.5504e4 if half else 3.4028234663852886e38)
    budget = ulp_scale * (e_act + output_ulps * spacing_of(reach, half, word, bits)) + atol
    if e_act == math.inf:
        budget = math.inf
    # ulp_distance
    g_nan = gv != gv
    r_nan = rv != rv
    if g_nan and r_nan:
        ulps = 0.0
    elif g_nan or r_nan:
        ulps = math.inf
    else:
        ulps = np.float64(abs(float_ordinal(gbits, half) - float_ordinal(rbits, half)))
    err = abs(gv - rv)
    judged = budget
    if gv == rv or (g_nan and r_nan):
        err = 0.0
    elif err != err:
        err = math.inf
    if abs(rv) == math.inf and err != 0.0:
        # overflowed in the reference: only that inf or the largest finite value of its sign
        # is right (tolerance.overflowed_alike); anything else errs without bound
        if gv * rv > 0.0 and abs(gv) >= (6.5504e4 if half else 3.4028234663852886e38):
            err = 0.0
        else:
            err = math.inf
            judged = 0.0
    if use_max_ulp:
        ratio = 0.0 if ulps == 0.0 else ulps / max(max_ulp, 1e-300)
        failing = ulps > max_ulp
    else:
        ratio = 0.0 if err == 0.0 else err / judged
        if judged == math.inf and abs(rv) < math.inf:
            ratio = 0.0
        elif ratio != ratio:
            ratio = math.inf
        failing = err > judged
    return budget, judged, err, ulps, ratio, failing


@njit(_JUDGE_SIG, cache=True, nogil=True, error_model="numpy")
def judge_normalization(  # type: ignore[no-untyped-def]  # noqa: C901 - one pass, every term of the model
    x, x_sk, x_sm,
    got, got_bits, g_sk, g_sm,
    ref, ref_bits, r_sk, r_sm,
    item_k, item_p0, item_p1, l_len, n_slice,
    sc, sc_k, sc_r, sc_const, bi, bi_k, bi_r, bi_const, ad, ad_k, ad_r, ad_const,
    mean_k, sd_k, e_mean_k, rel_sd_k, d_shift_k, d_rel_k, unit_k, undefined_k,
    c_pt, u, ceiling, act, pa, pb, act_ulps, canc, canc_ops, canc_consts,
    branch, sides, curved_from, curvature_rtol,
    half, ulp_scale, output_ulps, atol, max_ulp, use_max_ulp,
    fig, budget_out,
):  # fmt: skip
    """The normalization model (:func:`dmlconform.tolerance.budgets`) and the comparison of the
    main output over work items: item ``i`` is elements [item_p0[i], item_p1[i]) (in slice
    order) of slice item_k[i], and ``fig[i]`` gets its figures (F_* columns; the glue merges
    the items of a slice). ``budget_out`` (empty, or ``n_slice`` float64 per slice in slice
    order) receives the budgets. Running figures stay in locals: a store to ``fig`` per
    element would turn every loop-invariant load into a reload."""
    store = budget_out.size > 0
    word = np.empty(1)
    bits = word.view(np.int64)
    has_ceiling = ceiling == ceiling
    for i in range(item_k.size):
        k = item_k[i]
        p0 = item_p0[i]
        p1 = item_p1[i]
        mean = mean_k[k]
        sd = sd_k[k]
        e_mean = e_mean_k[k]
        rel_sd = rel_sd_k[k]
        d_shift = d_shift_k[k]
        d_rel = d_rel_k[k]
        unit = unit_k[k]
        undefined = undefined_k[k]
        shift_bound = e_mean / sd
        s_k = sc[sc_k[k], 0]
        b_k = bi[bi_k[k], 0]
        a_k = ad[ad_k[k], 0]
        best_ratio = -1.0
        best_pos = p0
        best_got = 0.0
        best_ref = 0.0
        best_budget = 0.0
        max_ulps = 0.0
        max_abs = 0.0
        failing_count = 0
        aa = bb = cc = dd = ee = d2 = rb2 = round2 = 0.0
        count = 0
        # rows m of the item, each from its first to its last element in [p0, p1): no integer
        # division per element (p // l_len cost a third of the pass)
        for m in range(p0 // l_len, (p1 - 1) // l_len + 1):
            j_lo = max(p0 - m * l_len, 0)
            j_hi = min(p1 - m * l_len, l_len)
            for j in range(j_lo, j_hi):
                p = m * l_len + j
                s = s_k if sc_const else sc[sc_k[k], sc_r[p]]
                b = b_k if bi_const else bi[bi_k[k], bi_r[p]]
                a = a_k if ad_const else ad[ad_k[k], ad_r[p]]
                xv = np.float64(x[k * x_sk + m * x_sm + j])
                xc = xv - mean
                z = xc / sd
                e_z = (e_mean + c_pt * u * abs(xc)) / sd + abs(z) * rel_sd
                y = s * z + b + a
                e_y = abs(s) * e_z + c_pt * u * (abs(s * z) + abs(b) + abs(a))
                if has_ceiling:
                    e_floor = e_y - abs(s) * (d_shift + abs(z) * d_rel)
                    e_y = _fmin(e_y, ceiling * (abs(s) * _fmax(unit, abs(z)) + abs(b) + abs(a)) + e_floor)
                excluded = False
                if act == 0:
                    e_act = e_y
                    slope = 1.0
                else:
                    f = activate(act, y, pa, pb)
                    lo = activate(act, y - e_y, pa, pb)
                    hi = activate(act, y + e_y, pa, pb)
                    e_act = _fmax(abs(lo - f), abs(hi - f))
                    slope = (hi - lo) / (2.0 * e_y) if e_y > 0.0 else 1.0
                    jump = 0.0
                    for t in range(branch.size):
                        if abs(y - branch[t]) <= e_y:
                            side = _fmax(
                                _fmax(abs(sides[t, 0] - f), abs(sides[t, 1] - f)), abs(sides[t, 2] - f)
                            )
                            jump = _fmax(jump, side)
                    excluded = jump > 0.0
                    if abs(e_y) < math.inf and e_y > curved_from:
                        ew = e_y / 16.0
                        near = (activate(act, y + ew, pa, pb) - activate(act, y - ew, pa, pb)) / (2.0 * ew)
                        if abs(slope - near) > curvature_rtol * _fmax(abs(slope), abs(near)):
                            excluded = True
                    e_act = _fmax(e_act, jump) + act_ulps * u * abs(f)
                    if canc_ops.size > 0:
                        e_act = e_act + canc * u * abs(run_program(canc_ops, canc_consts, y))
                if undefined:
                    e_act = math.inf
                g_at = k * g_sk + m * g_sm + j
                r_at = k * r_sk + m * r_sm + j
                rv = np.float64(ref[r_at])
                gv = np.float64(got[g_at])
                budget, judged, err, ulps, ratio, failing = _judge_element(
                    e_act, gv, rv, got_bits[g_at], ref_bits[r_at], half,
                    ulp_scale, output_ulps, atol, max_ulp, use_max_ulp, word, bits,
                )  # fmt: skip
                if store:
                    budget_out[k * n_slice + p] = budget
                if ratio > best_ratio:  # the first of equal maxima, as np.argmax
                    best_ratio = ratio
                    best_pos = p
                    best_got = gv
                    best_ref = rv
                    best_budget = judged
                if ulps > max_ulps:
                    max_ulps = ulps
                if err > max_abs:
                    max_abs = err
                if failing:
                    failing_count += 1
                if use_max_ulp:
                    continue
                # the aggregate fit's sums (tolerance.FIT_SUMS) over the usable elements
                d = gv - rv
                w = s * slope
                usable = (
                    abs(d) < math.inf and abs(budget) < math.inf and abs(w) < math.inf and abs(z) < math.inf
                )
                if usable and not excluded:
                    statistic_part = abs(w) * (shift_bound + abs(z) * rel_sd)
                    folded = c_pt * u * abs(w) * ((abs(xv) + abs(mean)) / sd)
                    residual = _fmax(budget - statistic_part, budget - e_act) + folded
                    rounding = output_ulps * spacing_of(rv, half, word, bits)
                    wz = w * z
                    aa += w * w
                    bb += w * wz
                    cc += wz * wz
                    dd += w * d
                    ee += wz * d
                    if w != 0.0:
                        count += 1
                    d2 += d * d
                    rb2 += residual * residual
                    round2 += rounding * rounding
        f_i = fig[i]
        f_i[F_RATIO] = best_ratio
        f_i[F_POS] = best_pos
        f_i[F_ULP] = max_ulps
        f_i[F_ABS] = max_abs
        f_i[F_FAIL] = failing_count
        f_i[F_GOT] = best_got
        f_i[F_REF] = best_ref
        f_i[F_BUDGET] = best_budget
        f_i[F_AA] = aa
        f_i[F_BB] = bb
        f_i[F_CC] = cc
        f_i[F_DD] = dd
        f_i[F_EE] = ee
        f_i[F_COUNT] = count
        f_i[F_D2] = d2
        f_i[F_RB2] = rb2
        f_i[F_ROUND2] = round2
