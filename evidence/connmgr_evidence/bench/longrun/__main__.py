"""``python -m connmgr.bench.longrun``: see :mod:`connmgr.bench.longrun.cli`."""

from connmgr.bench.longrun.cli import main

if __name__ == "__main__":  # importing this module (e.g. walking the package) runs nothing
    raise SystemExit(main())
