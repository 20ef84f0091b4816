"""The real DirectML.dll as a backend: run under Wine (vkd3d on Mesa's lavapipe) through a small
C runner that names no operator. ``dmlconform directml setup`` installs the stack; see
``backend.py`` for the backend, ``pack.py`` for how descs become DirectML's C structs."""
