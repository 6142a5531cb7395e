"""``python -m connmgr.bench.adoption``: see :mod:`connmgr.bench.adoption.cli`."""

from connmgr.bench.adoption.cli import main

if __name__ == "__main__":  # importing this module (e.g. walking the package) runs nothing
    raise SystemExit(main())
