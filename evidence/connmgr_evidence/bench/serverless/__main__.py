"""``python -m connmgr_evidence.bench.serverless``: see
:mod:`connmgr_evidence.bench.serverless.cli`."""

from connmgr_evidence.bench.serverless.cli import main

if __name__ == "__main__":  # importing this module (e.g. walking the package) runs nothing
    raise SystemExit(main())
