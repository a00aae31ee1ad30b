"""Regenerates the paper's figures from training runs and verification reports.

Files: ``runs/`` (the run plan, its cache, launching and loading runs), ``figures/`` (one
module per figure), ``analysis.py`` (measured vs modelled time, targets), ``style.py``
(colours and labels per algorithm), ``cli/`` (``palsgd figures``), ``commands.py`` (the
subcommand this package registers with :mod:`palsgd.cli`).
"""
