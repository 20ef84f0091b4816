"""Defaults shared by the run options (light: imported in every pytest process) and case
collection (heavy), kept apart so that neither imports the other for them."""

#: cases per operator x level x data type: the one default of run, the plugin and dxdispatch export
DEFAULT_CASES = 8
