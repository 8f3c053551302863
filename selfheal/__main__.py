"""``python -m selfheal`` is the ``selfheal`` command."""

from __future__ import annotations

import sys

from selfheal.cli import main

sys.exit(main())
