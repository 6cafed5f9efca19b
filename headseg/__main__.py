"""``python -m headseg`` is the ``headseg`` command."""

import sys

from headseg.cli import main

sys.exit(main())
