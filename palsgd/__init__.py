"""The ``palsgd`` command line: one dispatcher above theory/, empirical/ and paper_figures/.

``cli.py`` holds :func:`~palsgd.cli.main` (the console script ``palsgd`` and
``python -m palsgd``); each package lists the subcommands it owns in its ``commands.py``.
"""
