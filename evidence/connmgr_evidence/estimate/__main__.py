"""``python -m connmgr_evidence.estimate {fleet,logs,jmx} ...``."""

import sys

from connmgr_evidence.estimate.cli import main

if __name__ == "__main__":
    sys.exit(main())
