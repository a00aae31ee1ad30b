"""The ``palsgd`` command line: one dispatcher above core/, theory/, empirical/ and
paper_figures/ (the exit codes and the guard that applies them are :mod:`core`'s).

``cli.py`` holds :func:`~palsgd.cli.main` (the console script ``palsgd`` and
``python -m palsgd``); each package lists the subcommands it owns in its ``commands.py``.
"""

from palsgd import startup as _startup

if _startup.launched_as_palsgd():  # not when a program imports the package (pytest)
    _startup.install()
