"""``python -m selfheal.cli``: the command line (as ``selfheal``)."""

import sys

from selfheal.cli import main

sys.exit(main())
