"""``python -m spanwatch``."""

import sys

from spanwatch.cli import main

sys.exit(main())
