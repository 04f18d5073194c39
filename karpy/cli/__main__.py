"""``python -m karpy.cli``: the same as the ``karpy`` command."""

import sys

from karpy.cli import main

sys.exit(main())
