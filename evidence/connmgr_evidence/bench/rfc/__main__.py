"""``python -m connmgr_evidence.bench.rfc``: see :func:`connmgr_evidence.bench.rfc.main`."""

from connmgr_evidence.bench.rfc import main

if __name__ == "__main__":
    raise SystemExit(main())
