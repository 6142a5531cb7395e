"""``python -m connmgr_evidence.bench.adoption``: see :mod:`connmgr_evidence.bench.adoption.cli`."""

from connmgr_evidence.bench.adoption.cli import main

if __name__ == "__main__":  # importing this module (e.g. walking the package) runs nothing
    raise SystemExit(main())
