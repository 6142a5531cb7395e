"""``python -m connmgr.bench.longrun``: see :mod:`connmgr.bench.longrun.cli`."""

from connmgr.bench.longrun.cli import main

raise SystemExit(main())
