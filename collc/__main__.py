"""``python -m collc``: the same CLI as the ``collc`` command (for a checkout on PYTHONPATH)."""

import sys

from collc.cli import main

sys.exit(main())
