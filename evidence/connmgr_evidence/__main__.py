"""``python -m connmgr_evidence COMMAND ...``: see :mod:`connmgr_evidence.cli`."""

from connmgr_evidence.cli import main

if __name__ == "__main__":  # importing this module (e.g. walking the package) runs nothing
    raise SystemExit(main())
