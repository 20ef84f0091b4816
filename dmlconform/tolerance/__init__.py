"""Tolerance: how far from the float64 reference a sound implementation may land, element by
element, and the verdict.

Modules: :mod:`~dmlconform.tolerance.terms` (ULP metrics, coefficients, growth of a sum's error,
the activation and output-rounding terms), one module per budget model
(:mod:`~dmlconform.tolerance.normalization`, :mod:`~dmlconform.tolerance.pointwise` for given
statistics, :mod:`~dmlconform.tolerance.rms`, :mod:`~dmlconform.tolerance.gradients`; which one
serves a desc is the kernel registry's ``budgets`` part), :mod:`~dmlconform.tolerance.aggregate`
(the slice-wise fit), :mod:`~dmlconform.tolerance.compare` (the verdict), and the compiled judge
(:mod:`~dmlconform.tolerance.judge`, imported only for large cases). The names below are the
package's public surface.
"""

from dmlconform.tolerance.aggregate import (
    FIT_SUMS,
    AggregateModel,
    aggregate_check,
    aggregate_from_sums,
    fit_sums,
)
from dmlconform.tolerance.compare import (
    Comparison,
    OutputComparison,
    compare,
    member_comparison,
    worst_element,
)
from dmlconform.tolerance.normalization import (
    CURVATURE_RTOL,
    CURVED_FROM,
    SliceStatistics,
    StatisticsErrors,
    budgets,
    divisor_error,
    grid_slices,
    own_divisor_error,
    statistics_errors,
    statistics_output_budgets,
)
from dmlconform.tolerance.terms import (
    UNIT_ROUNDOFF,
    Budgets,
    Coefficients,
    block_length,
    branch_jumps,
    cancellation_scale,
    cap,
    coefficients,
    correlated_growth,
    growth,
    ordinal,
    overflow_edge,
    overflow_within,
    overflowed_alike,
    repetition,
    ulp_distance,
    ulp_of,
    with_output_rounding,
)

__all__ = [
    "CURVATURE_RTOL", "CURVED_FROM", "FIT_SUMS", "UNIT_ROUNDOFF", "AggregateModel", "Budgets",
    "Coefficients", "Comparison", "OutputComparison", "SliceStatistics", "StatisticsErrors",
    "aggregate_check", "aggregate_from_sums", "block_length", "branch_jumps", "budgets",
    "cancellation_scale", "cap", "coefficients", "compare", "correlated_growth", "divisor_error",
    "fit_sums", "grid_slices", "growth", "member_comparison", "ordinal", "overflow_edge", "overflow_within",
    "overflowed_alike", "own_divisor_error", "repetition", "statistics_errors", "statistics_output_budgets", "ulp_distance", "ulp_of",
    "with_output_rounding", "worst_element",
]  # fmt: skip
