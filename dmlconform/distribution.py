"""What the project declares once, in pyproject.toml: its built-in backends (the entry-point group
``dmlconform.backends``) and which extra installs which third-party package.

Everything that lists the built-in backends (the loader's table, ``run --help``) or tells a user
which extra to install reads it here, so that adding a backend is one entry point and one extra
in pyproject.toml. An installed package answers from its distribution's metadata; a source
checkout that is not installed, or one newer than its installation, from the pyproject.toml
beside the package. Light on purpose: the CLI reads it to build its help.
"""

from __future__ import annotations

import importlib.metadata
import re
import tomllib
from functools import cache
from pathlib import Path

ENTRY_POINT_GROUP = "dmlconform.backends"
DISTRIBUTION = "dmlconform"
_PYPROJECT = Path(__file__).resolve().parent.parent / "pyproject.toml"
#: the name a requirement begins with (PEP 508)
_REQUIREMENT_NAME = re.compile(r"\s*([A-Za-z0-9][A-Za-z0-9._-]*)")


def _from_pyproject() -> tuple[dict[str, str], dict[str, str]] | None:
    try:
        project = tomllib.loads(_PYPROJECT.read_text())["project"]
    except (OSError, KeyError, tomllib.TOMLDecodeError):
        return None
    if project.get("name") != DISTRIBUTION:
        return None
    backends = dict(project.get("entry-points", {}).get(ENTRY_POINT_GROUP, {}))
    extras = {
        package: extra
        for extra, requirements in project.get("optional-dependencies", {}).items()
        for package in map(_requirement_name, requirements)
        if package and package != DISTRIBUTION
    }
    return backends, extras


def _from_metadata() -> tuple[dict[str, str], dict[str, str]]:
    try:
        dist = importlib.metadata.distribution(DISTRIBUTION)
    except importlib.metadata.PackageNotFoundError:
        return {}, {}
    backends = {ep.name: ep.value for ep in dist.entry_points if ep.group == ENTRY_POINT_GROUP}
    extras = {}
    for line in dist.requires or ():
        marker = re.search(r"extra\s*==\s*['\"]([^'\"]+)['\"]", line)
        package = _requirement_name(line)
        if marker and package and package != DISTRIBUTION:
            extras.setdefault(package, marker.group(1))
    return backends, extras


def _requirement_name(requirement: str) -> str | None:
    found = _REQUIREMENT_NAME.match(requirement)
    return found.group(1).lower().replace("_", "-") if found else None


@cache
def _declared() -> tuple[dict[str, str], dict[str, str]]:
    return _from_pyproject() or _from_metadata()


def builtin_backends() -> dict[str, str]:
    """The built-in backends: name -> ``module:Class``, as pyproject.toml registers them."""
    return dict(_declared()[0])


def extra_for_package(package: str) -> str | None:
    """The extra (``pip install dmlconform[EXTRA]``) that installs ``package``, if one does: the
    first extra that names it (a meta-extra such as ``all`` names the others, not packages)."""
    return _declared()[1].get(package.lower().replace("_", "-"))
