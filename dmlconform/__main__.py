"""``python -m dmlconform``: the ``dmlconform`` command, for a checkout that is not installed."""

import sys

from dmlconform.cli import main

sys.exit(main())
