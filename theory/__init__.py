"""Convergence theory of PALSGD and its baselines.

Symbolic bounds with their step-size conditions (:mod:`theory.bound`, :mod:`theory.bounds`),
machine-checked proof steps (:mod:`theory.proofs`), a hyperparameter checker
(:mod:`theory.check`), synthetic problems with exact constants (:mod:`theory.problems`),
a vectorised simulator (:mod:`theory.simulate`), exact quadratic moment recursions
(:mod:`theory.moments`) and Monte-Carlo verification (:mod:`theory.verify`).
"""

__version__ = "0.1.0"
