"""``python -m connmgr.bench.rfc``: see :func:`connmgr.bench.rfc.main`."""

from connmgr.bench.rfc import main

if __name__ == "__main__":
    raise SystemExit(main())
