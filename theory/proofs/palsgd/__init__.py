"""The PALSGD convergence theorem (derived here) as a chain of machine-checked lemmas.

The paper's own theorem text (Naganuma et al., TMLR 2025) was not available to the
project; this theorem and its proof are the project's own derivation. The proof is written
out in ``docs/palsgd_proof.md``; each numbered lemma there is one object built here, and
:func:`theorem` assembles the bound and its step-size conditions *from those objects*
(the bound is the right-hand side of the last lemma, the conditions are the condition
hypotheses the certificates use), so the statement is never typed in twice.

Setting (Theorem 1 of the docs). ``K`` workers, ``f = (1/K) sum_k f_k``; A1 every ``f_k``
is L-smooth; A2 ``E g_k = grad f_k``, ``E||g_k - grad f_k||^2 <= sigma^2``, independent
across workers and steps; A3 ``(1/K) sum_k ||grad f_k - grad f||^2 <= zeta^2``; A4
``F0 = f(x_0) - f_star``. PALSGD with inner SGD and outer averaging: within a round the
anchor ``z`` is fixed and every worker, from ``x_k = z``, repeats ``H`` times
``x <- x - (alpha*eta/p)(x - z)`` with probability ``p`` (pull) and
``x <- x - (alpha/(1-p)) g_k(x)`` otherwise; then ``z <- mean_k x_k``. Coins are
independent across workers (``coins="independent"``, the algorithm as described) or one
coin per step shared by all workers (``coins="shared"``, the authors' code). The bound is
on ``(1/T) sum_{t<T} E||grad f(xbar_t)||^2`` with ``xbar_t = mean_k x_{k,t}``, ``T = R*H``.

Notation inside the proof (per step ``t`` of a round, all expectations total):
``Phi = ||grad f(xbar)||^2``; ``Lam = (1/K) sum_k ||grad f_k(x_k)||^2``;
``D = (1/K) sum_k ||x_k - z||^2`` (anchor distance); ``C = (1/K) sum_k ||x_k - xbar||^2``
(consensus error); ``W = ||xbar - z||^2``; ``Gam`` is ``Lam`` for independent coins and
``||(1/K) sum_k grad f_k(x_k)||^2`` for shared coins.

The chain is split the way the proof reads (``docs/palsgd_proof.md``): :mod:`.notation`,
:mod:`.oracle` (L1-L5c), :mod:`.descent` (L6-L11), :mod:`.drift` (L12-L16), :mod:`.rounds`
(L17-L20s) and :mod:`.theorem` (assembly and cross-checks).
"""

from __future__ import annotations

from theory.proofs.palsgd.descent import (  # noqa: F401
    _descent_lemmas,
    _descent_spot_check,
    _one_step_lemma,
)
from theory.proofs.palsgd.drift import (  # noqa: F401
    _drift_lemmas,
    _pull_contraction_lemma,
)
from theory.proofs.palsgd.notation import (  # noqa: F401
    A_,
    COINS,
    DOMAIN,
    F0,
    SD,
    AvgVar,
    Bq,
    C,
    D,
    Delta,
    Gam,
    Gap,
    H,
    K,
    L,
    Lam,
    M,
    Omega,
    Phi,
    R,
    SGam,
    SLam,
    Snoise,
    SPhi,
    T,
    Vbar,
    W,
    _h,
    _nn,
    _u,
    alpha,
    coefficients,
    eta,
    f0,
    fplus,
    ip,
    p,
    s2,
    sigma,
    specialise_p0,
    zeta,
)
from theory.proofs.palsgd.oracle import (  # noqa: F401
    _aggregate_variance_lemma,
    _averaging_lemma,
    _coin,
    _oracle,
    _oracle_lemmas,
    _var_formula,
)
from theory.proofs.palsgd.rounds import (  # noqa: F401
    _round_lemmas,
    _theorem_lemmas,
)
from theory.proofs.palsgd.theorem import (  # noqa: F401
    PALSGDTheorem,
    _c2_redundancy,
    _collect_conditions,
    _Core,
    _core,
    _extra_checks,
    _recommended_step,
    _to_conditions,
    build_chain,
    local_sgd_theorem,
    theorem,
)

__all__ = [
    "COINS",
    "PALSGDTheorem",
    "coefficients",
    "build_chain",
    "theorem",
    "local_sgd_theorem",
    "specialise_p0",
]
