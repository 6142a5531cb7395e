"""``python -m connmgr_evidence.estimate {fleet,logs,jmx} ...``."""

import sys

from connmgr_evidence.estimate.cli import main

sys.exit(main())
