"""The hyperparameter checker behind ``palsgd check``.

Given problem constants (``L``, ``sigma``, ``zeta``, ``F0``) and hyperparameters (``K``,
``H``, ``p``, ``alpha``, ``eta``, ``gamma``, ``mu``, ``T``, ...), :func:`check` reports for
every applicable encoded bound: each condition with pass/fail and margin, the bound's value
and each term's share, the dominant term, the step ``alpha`` that minimises the bound, the
largest ``H`` that keeps linear speed-up, and the communication rounds to reach ``eps``.
The bounds checked are those whose algorithm spec covers the configuration's algorithm (a
row of the algorithm table, :mod:`theory.algorithm`). It also flags configuration-level
stability problems of the PALSGD step (pull coefficient ``alpha*eta/p``: a pull multiplies
``x - z`` by ``1 - alpha*eta/p``, unstable from 2 on by the verdict ``palsgd train`` takes,
:func:`theory.algorithm.pull_stability`; gradient-branch step
``alpha L/(1-p)``: a step of size ``alpha/(1-p)`` on an L-smooth quadratic is stable for
``alpha L/(1-p) <= 2``). The report is a :class:`CheckReport`; ``to_dict()`` is JSON-ready and
``to_text()`` is what the CLI prints.

Python use (notebooks, the probe)::

    from theory.check import check
    rep = check({"L": 1.0, "sigma": 1.0, "F0": 1.0, "K": 4, "H": 32, "T": 10**5,
                 "alpha": 0.01})
    rep.bounds[0].value, rep.to_dict()

CLI: ``palsgd check --L 1 --sigma 1 --F0 1 --K 4 --H 32 --T 100000 --lr 0.01 [--json]``,
``--config run.yaml`` (keys: parameter names or the authors' flag names; flags override the
file), ``--preset NAME`` (:mod:`theory.presets`), ``--bound NAME`` (repeatable), ``--eps``.
Exit status 0 whether or not conditions hold (it is a report); 2 on bad input; 5 when an
upper bound is below a lower bound where both apply (:mod:`~theory.check.contradiction`).

Files: :mod:`~theory.check.evaluate` (:func:`check`, :func:`infer_algorithm`, the verdict),
:mod:`~theory.check.warnings` (configuration-level findings), :mod:`~theory.check.report`
(the report types and :func:`jsonable`, the JSON cleaner the reports of check and verify
use), :mod:`~theory.check.render` (the text), :mod:`~theory.check.command` (the flags, the
``--config`` reader and :func:`run`).

Files: ``evaluate.py`` (the check and its verdict), ``contradiction.py`` (an upper bound
below a lower bound), ``lower.py`` (the lower bounds beside each bound), ``warnings.py``
(findings about the configuration), ``report.py`` (result types, JSON), ``render.py``
(text), ``command.py`` (flags, ``--config``, ``run``).
"""

from theory.check.command import add_arguments, load_config, run
from theory.check.evaluate import ALGORITHMS, check, infer_algorithm
from theory.check.report import (
    BoundCheck,
    CheckReport,
    ConditionCheck,
    ConfigWarning,
    TermShare,
    jsonable,
)

__all__ = [
    "ALGORITHMS",
    "BoundCheck",
    "CheckReport",
    "ConditionCheck",
    "ConfigWarning",
    "TermShare",
    "add_arguments",
    "check",
    "infer_algorithm",
    "jsonable",
    "load_config",
    "run",
]
