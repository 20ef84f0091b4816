"""The closed vocabulary of rule kinds, one module per family: ``base`` (the :class:`Context`,
the :class:`RuleKind` base, the ``KINDS`` registry), ``support`` (presence and the support
table), ``members`` (members tied to one another), ``axes`` (arrays and axes), ``tensors`` and
``outputs`` (each tensor as a buffer desc), ``activations`` and ``attributes``. Each kind's
class holds its check, its edges and its breaker; ``breaking`` holds what the breakers work
with (the :class:`Chooser`, the :class:`Overrides` of the legal base).

This face imports every family so that each ``@kind`` has registered whenever anything imports
the package: ``KINDS`` is complete, whichever kind a caller looks up first. It names what the
rest of the code imports from ``dmlconform.specification.rules``; the family modules import
``base`` and ``breaking`` (and each other), never this face.
"""

from __future__ import annotations

from dmlconform.specification.rules.activations import (
    ActivationAvailable,
    ActivationFusable,
    ActivationKind,
    ActivationParameterMin,
    ActivationParameterRequired,
    ActivationTensorsNull,
    activation_params,
)
from dmlconform.specification.rules.attributes import AttributeOneOf, AttributeRange
from dmlconform.specification.rules.axes import ArrayLength, AxesInRange, AxesUnique
from dmlconform.specification.rules.base import KINDS, Context, RuleKind, kind_of, of_kind
from dmlconform.specification.rules.breaking import Chooser, Overrides
from dmlconform.specification.rules.members import (
    Broadcastable,
    PairedPresence,
    SameDataType,
    SameDimensionCount,
    SameSizes,
    condition_holds,
    fixed_dims,
)
from dmlconform.specification.rules.outputs import TensorOutputDistinctStrides, TensorOutputSpan
from dmlconform.specification.rules.support import (
    Available,
    Required,
    SupportDataType,
    SupportDimensionCount,
)
from dmlconform.specification.rules.tensors import (
    TensorAlignment,
    TensorDimensionCountRange,
    TensorElementCountMax,
    TensorFlags,
    TensorKind,
    TensorSizesCount,
    TensorSizesPositive,
    TensorStridesCount,
    TensorTotalSize,
    TensorTotalSizeMax,
)

__all__ = [
    "KINDS",
    "ActivationAvailable",
    "ActivationFusable",
    "ActivationKind",
    "ActivationParameterMin",
    "ActivationParameterRequired",
    "ActivationTensorsNull",
    "ArrayLength",
    "AttributeOneOf",
    "AttributeRange",
    "Available",
    "AxesInRange",
    "AxesUnique",
    "Broadcastable",
    "Chooser",
    "Context",
    "Overrides",
    "PairedPresence",
    "Required",
    "RuleKind",
    "SameDataType",
    "SameDimensionCount",
    "SameSizes",
    "SupportDataType",
    "SupportDimensionCount",
    "TensorAlignment",
    "TensorDimensionCountRange",
    "TensorElementCountMax",
    "TensorFlags",
    "TensorKind",
    "TensorOutputDistinctStrides",
    "TensorOutputSpan",
    "TensorSizesCount",
    "TensorSizesPositive",
    "TensorStridesCount",
    "TensorTotalSize",
    "TensorTotalSizeMax",
    "activation_params",
    "condition_holds",
    "fixed_dims",
    "kind_of",
    "of_kind",
]
