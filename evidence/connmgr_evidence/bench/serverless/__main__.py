"""``python -m connmgr.bench.serverless``: see :mod:`connmgr.bench.serverless.cli`."""

from connmgr.bench.serverless.cli import main

if __name__ == "__main__":  # importing this module (e.g. walking the package) runs nothing
    raise SystemExit(main())
