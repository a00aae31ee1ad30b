"""Machine-checked proofs: the lemma framework and the PALSGD lemma chain.

:mod:`theory.proofs.lemmas` is the small framework (identities, certificate inequalities,
induction, sampled inequalities, cited facts, hypotheses built from lemma objects);
:mod:`theory.proofs.palsgd` builds the chain of lemmas of Theorem 1 (derived here,
``docs/palsgd_proof.md``) and assembles the bound; :mod:`theory.proofs.anchor` does the same
for Theorem 2 (outer learning rate and momentum, ``docs/anchor_theorem.md``).
"""

from theory.proofs.lemmas import CheckResult, Lemma, check_all

__all__ = ["CheckResult", "Lemma", "check_all"]
