"""``python -m connmgr_evidence.realkafka [...]``: the same as ``connmgr cluster [...]``
(:func:`connmgr_evidence.realkafka.cli.cluster_command`; ``--help`` says what it takes)."""

from __future__ import annotations

import sys

from connmgr_evidence.realkafka.cli import cluster_command

if __name__ == "__main__":
    sys.exit(cluster_command(sys.argv[1:]))
