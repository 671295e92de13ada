"""``python -m kubelet`` is the ``kubelet`` command."""

import sys

from .command import main

sys.exit(main())
