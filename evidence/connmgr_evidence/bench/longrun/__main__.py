"""``python -m connmgr_evidence.bench.longrun``: see :mod:`connmgr_evidence.bench.longrun.cli`."""

from connmgr_evidence.bench.longrun.cli import main

if __name__ == "__main__":  # importing this module (e.g. walking the package) runs nothing
    raise SystemExit(main())
