"""``python -m connmgr COMMAND ...``: the ``connmgr`` command (:mod:`connmgr.cli`)."""

from connmgr.cli import main

if __name__ == "__main__":  # importing this module (e.g. walking the package) runs nothing
    raise SystemExit(main())
