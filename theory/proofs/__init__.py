"""Machine-checked proofs: the lemma framework and the PALSGD lemma chain.

:mod:`theory.proofs.lemmas` is the small framework (identities, certificate inequalities,
sampled inequalities, cited facts); :mod:`theory.proofs.palsgd` builds the chain of lemmas
of the PALSGD theorem (derived here, ``docs/palsgd_proof.md``) and assembles the bound.
"""

from theory.proofs.lemmas import CheckResult, Lemma, check_all

__all__ = ["CheckResult", "Lemma", "check_all"]
