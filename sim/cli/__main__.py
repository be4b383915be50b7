"""``python -m sim.cli``: the ``mxu`` command."""

import sys

from sim.cli import main

sys.exit(main())
