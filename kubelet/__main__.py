"""``python -m kubelet`` is the ``kubelet`` command."""

import sys

from .cli import main

sys.exit(main())
