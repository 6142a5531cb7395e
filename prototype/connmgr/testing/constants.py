"""Make a derandomized Hypothesis search the same search wherever it runs.

Hypothesis (6.13x and later) sometimes draws an integer, float or string from constants it
mines out of the *local* modules loaded at the time (``hypothesis.internal.conjecture.
providers._get_local_constants``: every module outside site-packages and the standard library,
tests excluded). Which of our modules are loaded differs between ``pytest`` (after other tests
ran), a pool worker of ``connmgr bench`` and a one-off script, so the same derandomized search
explored different examples in each: a mutant's search took 20 s in one process and 450 s in
another, and a counterexample met at example 300 on one machine was missed by CI.

Stateful machines draw at least one such integer in every run (the rule feature flags,
``draw_integer(0, 254)``), so the pool cannot be avoided; it can be fixed.
:func:`load_whole_package` imports every ``connmgr`` module before a machine is built, so the
pool is the package's constants in every context (with the package installed in editable mode,
as the README installs it; an ordinary install is not local and contributes nothing, also the
same everywhere). Pin the Hypothesis version too: its engine changes between releases.
"""

from __future__ import annotations

import importlib
import pkgutil

_loaded = False


def load_whole_package() -> None:
    """Import every module of ``connmgr``, the product (once per process).

    The evidence (``connmgr_evidence``) is not loaded: the product never imports it. A
    process that has loaded it anyway (a ``connmgr bench`` worker) mines its constants too;
    the fingerprint of ``tests/properties/test_search_is_reproducible.py`` (100 examples of
    the java-today pair) was the same with every evidence module loaded and without."""
    global _loaded
    if _loaded:
        return
    import connmgr

    for module in pkgutil.walk_packages(connmgr.__path__, "connmgr."):
        if module.name.endswith(".__main__"):
            continue  # a program, not a library: importing it would run it
        importlib.import_module(module.name)
    _loaded = True
