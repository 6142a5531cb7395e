"""``python -m connmgr.bench.rfc``: see :func:`connmgr.bench.rfc.main`."""

from connmgr.bench.rfc import main

raise SystemExit(main())
