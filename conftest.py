"""Registers the dmlconform pytest plugin for runs from a source checkout.

An installed package registers the same module through its ``pytest11`` entry point; registering
it again under another name would make pluggy refuse the duplicate, so the plugin is listed here
only when the entry point is not going to load it.
"""

from __future__ import annotations

import os
from importlib.metadata import entry_points


def _entry_point_loads_plugin() -> bool:
    if os.environ.get("PYTEST_DISABLE_PLUGIN_AUTOLOAD"):
        return False
    return any(ep.value == "dmlconform.runner.plugin" for ep in entry_points(group="pytest11"))


pytest_plugins = [] if _entry_point_loads_plugin() else ["dmlconform.runner.plugin"]
