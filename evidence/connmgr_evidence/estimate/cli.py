"""``connmgr estimate fleet|logs|jmx``: one entry point, each subcommand in its own module.

Each subcommand module has ``main(argv) -> int``; they are imported only when chosen, so a
missing one (or its missing dependencies) affects only itself.
"""

from __future__ import annotations

import importlib
import sys
from typing import Final

SUBCOMMANDS: Final = {
    "fleet": (
        "connmgr_evidence.estimate.fleet",
        "a fleet description (TOML): per-broker peaks and limits",
    ),
    "logs": (
        "connmgr_evidence.estimate.logs_cli",
        "Java NetworkClient logs: per-client connections",
    ),
    "jmx": ("connmgr_evidence.estimate.jmx", "a broker JMX export: peaks and storms"),
}
USAGE: Final = "usage: connmgr estimate {fleet,logs,jmx} ...\n" + "".join(
    f"  {name:6} {summary}\n" for name, (_, summary) in SUBCOMMANDS.items()
)


def main(argv: list[str] | None = None) -> int:
    """Run the subcommand ``argv[0]`` with the rest; its exit code, or 2 for a usage error
    or a subcommand this installation lacks."""
    args = sys.argv[1:] if argv is None else list(argv)
    if not args or args[0] in ("-h", "--help"):
        sys.stdout.write(USAGE)
        return 0 if args else 2
    name, rest = args[0], args[1:]
    if name not in SUBCOMMANDS:
        sys.stderr.write(f"connmgr estimate: unknown subcommand {name!r}\n{USAGE}")
        return 2
    module_name = SUBCOMMANDS[name][0]
    try:
        module = importlib.import_module(module_name)
    except ModuleNotFoundError as e:
        if e.name is not None and module_name.startswith(e.name):
            sys.stderr.write(
                f"connmgr estimate {name}: not available in this installation "
                f"({module_name} is missing)\n"
            )
            return 2
        raise
    code: int = module.main(rest)
    return code
