"""The DirectML versions this backend can fetch, and where each one comes from.

DirectML has no Linux release and its NuGet package is not reachable from the project's machines,
so every ``DirectML.dll`` here is the one bundled inside a Windows wheel of ``onnxruntime-directml``
on PyPI. Each row names ONE wheel carrying that DLL and a ``--python-version`` for which
``pip download --platform win_amd64 --only-binary=:all:`` lists that wheel: the listing depends on the
Python version (3.8 lists 1.9.0-1.19.2, 3.10 lists 1.12.0-1.23.0, 3.12 lists 1.17.0-1.24.4), and pip
refuses a wheel it does not list. The DLL's FileVersion is checked after download, so a wrong row
fails loudly instead of testing another DirectML.

``max_feature_level`` and ``runs_here`` are what was measured under Wine 8.0 (vkd3d 1.6) on Mesa
lavapipe 25 (docs: shared/design/directml-on-linux.md): the two versions marked ``runs_here=False``
do not produce results there, and ``note`` says why, so a caller can refuse them with the reason
rather than report garbage.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Release:
    """One DirectML version and the wheel it is taken from.

    ``dml_version`` is the prefix the DLL's FileVersion must start with; ``package_version`` is
    the ``onnxruntime-directml`` wheel version; ``python_version`` the ``--python-version`` for
    which pip lists that wheel for win_amd64; ``max_feature_level`` the maximum feature level the
    DLL reported on Wine + lavapipe (``None`` where it never got that far).
    """

    dml_version: str
    package: str
    package_version: str
    python_version: str
    max_feature_level: str | None
    runs_here: bool
    note: str


_PACKAGE = "onnxruntime-directml"
_OK = "11/11 MVN1 / BNT probe cases matched numpy on Wine 8.0 + lavapipe 25"

RELEASES: tuple[Release, ...] = (
    Release(
        "1.5.1",
        _PACKAGE,
        "1.9.0",
        "3.8",
        None,
        False,
        "crashes under Wine: DirectML divides by WaveLaneCountMin, which vkd3d 1.6 reports as 0",
    ),
    Release("1.8.0", _PACKAGE, "1.10.0", "3.8", "5_0", True, _OK + " (FLOAT16 differs from 1.12+)"),
    Release("1.9.0", _PACKAGE, "1.12.1", "3.8", "5_0", True, _OK + " (FLOAT16 differs from 1.12+)"),
    Release("1.9.1", _PACKAGE, "1.13.1", "3.8", "5_0", True, _OK + " (FLOAT16 differs from 1.12+)"),
    Release(
        "1.10.1",
        _PACKAGE,
        "1.14.1",
        "3.8",
        "5_2",
        False,
        "records nothing and exits 0: DirectML asks for ID3D12Device5, Wine's vkd3d 1.6 answers "
        "E_NOINTERFACE, outputs are left untouched and only GetDeviceRemovedReason says 0x887a0005",
    ),
    Release("1.12.0", _PACKAGE, "1.15.1", "3.8", "6_1", True, _OK),
    Release("1.12.1", _PACKAGE, "1.16.3", "3.8", "6_1", True, _OK),
    Release("1.13.1", _PACKAGE, "1.17.3", "3.8", "6_2", True, _OK),
    Release("1.14.1", _PACKAGE, "1.18.1", "3.8", "6_3", True, _OK),
    Release("1.15.1", _PACKAGE, "1.19.2", "3.8", "6_4", True, _OK),
    Release("1.15.2", _PACKAGE, "1.20.1", "3.10", "6_4", True, _OK),
    Release("1.15.4", _PACKAGE, "1.24.4", "3.12", "6_4", True, _OK),
)

#: The newest DirectML a wheel carries, and the one the design measurements were made with.
DEFAULT_DML_VERSION = "1.15.4"

_BY_VERSION = {r.dml_version: r for r in RELEASES}


def release(version: str) -> Release:
    """The table row for DirectML ``version`` (e.g. ``"1.15.4"``).

    Raises ``KeyError`` whose message lists the known versions, so a typo on the command line is
    answered with the choices instead of a bare key.
    """
    try:
        return _BY_VERSION[version]
    except KeyError:
        known = ", ".join(r.dml_version for r in RELEASES)
        raise KeyError(f"unknown DirectML version {version!r}; known: {known}") from None
