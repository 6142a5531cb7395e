"""``python -m connmgr.realkafka [...]``: the same as ``connmgr cluster [...]``
(:func:`connmgr.realkafka.cli.cluster_command`; ``--help`` says what it takes)."""

from __future__ import annotations

import sys

from connmgr.realkafka.cli import cluster_command

if __name__ == "__main__":
    sys.exit(cluster_command(sys.argv[1:]))
