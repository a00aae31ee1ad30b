"""The PALSGD convergence theorem (derived here) as a chain of machine-checked lemmas.

The paper's own theorem text (Naganuma et al., TMLR 2025) was not available to the
project; this theorem and its proof are the project's own derivation. The proof is written
out in ``docs/palsgd_proof.md``; each numbered lemma there is one function here that
returns its lemma object, and :func:`theorem` assembles the bound and its step-size
conditions *from those objects* (the bound is the right-hand side of the last lemma, the
conditions are the condition hypotheses the certificates use), so the statement is never
typed in twice. A hypothesis one lemma takes from another is built from that lemma's
object (:func:`theory.proofs.lemmas.from_lemma`, :func:`theory.proofs.lemmas.borrow`).

Setting (Theorem 1 of the docs). ``K`` workers, ``f = (1/K) sum_k f_k``; A1 every ``f_k``
is L-smooth; A2 ``E g_k = grad f_k``, ``E||g_k - grad f_k||^2 <= sigma^2``, independent
across workers and steps; A3 ``(1/K) sum_k ||grad f_k - grad f||^2 <= zeta^2``; A4
``F0 = f(x_0) - f_star``. PALSGD with inner SGD and outer averaging, independent coins
(``coins="independent"``) or one coin per step shared by all workers (``coins="shared"``,
the authors' code). The bound is on ``(1/T) sum_{t<T} E||grad f(xbar_t)||^2``.

Files, in the order the proof reads: :mod:`.notation` (symbols, constants), :mod:`.oracle`
(L1-L5c), :mod:`.descent` (L6-L11), :mod:`.drift` (L12-L16, L14 and L16 by induction for
every t and H), :mod:`.rounds` (L17-L20s), :mod:`.partial` (L21: the final partial
round), :mod:`.chain` (which lemma object each lemma is built from) and :mod:`.theorem`
(assembly, conditions, cross-checks X1, X1s, X2).
"""

from __future__ import annotations

from theory.proofs.palsgd.chain import CORE, WIRING, Chain
from theory.proofs.palsgd.notation import (  # noqa: F401
    COINS,
    DOMAIN,
    SD,
    C,
    D,
    Delta,
    Gam,
    Lam,
    Phi,
    R,
    SLam,
    SPhi,
    W,
    coefficients,
    specialise_p0,
)
from theory.proofs.palsgd.oracle import _coin, _oracle  # noqa: F401
from theory.proofs.palsgd.theorem import (  # noqa: F401
    PALSGDTheorem,
    _collect_conditions,
    _descent_spot_check,
    _to_conditions,
    build_chain,
    local_sgd_theorem,
    theorem,
)

__all__ = [
    "COINS",
    "CORE",
    "WIRING",
    "Chain",
    "PALSGDTheorem",
    "coefficients",
    "build_chain",
    "theorem",
    "local_sgd_theorem",
    "specialise_p0",
]
