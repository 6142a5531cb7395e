"""``python -m connmgr.estimate {fleet,logs,jmx} ...``."""

import sys

from connmgr.estimate.cli import main

sys.exit(main())
