"""Problems, bound values and seeded random configurations for the Monte-Carlo tests."""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any

import numpy as np

from core.errors import UserInputError
from theory import problems
from theory.algorithm import AlgorithmSpec
from theory.bound import Bound
from theory.verify.records import ConstantCheck
from theory.verify.settings import Config, VerifySettings


def bound_spec(bound: Bound) -> AlgorithmSpec:
    """The algorithm spec ``bound`` is stated for (:attr:`theory.bound.Bound.algorithm`,
    with its coin model and outer update): what the verifier simulates, with each design's
    hyperparameters. A bound that states none cannot be simulated."""
    spec = getattr(bound, "algorithm", None)
    if spec is None:
        raise UserInputError(f"bound {bound.name!r} names no algorithm; cannot simulate it")
    return spec


def _child_seed(seed: int, *key: int) -> int:
    """A 31-bit seed derived from ``seed`` and a key (independent streams per purpose)."""
    ss = np.random.SeedSequence(entropy=int(seed), spawn_key=tuple(int(k) for k in key))
    return int(ss.generate_state(1, np.uint32)[0] >> 1)


def _stable_key(text: str) -> int:
    return int.from_bytes(text.encode()[:8].ljust(8, b"\0"), "little") % (2**31) + len(text)


# ------------------------------------------------------------------ problems


class ProblemCache:
    """Builds problems once per (name, K, zeta) and applies user-declared constants."""

    def __init__(self, settings: VerifySettings):
        self.settings = settings
        self._cache: dict[tuple, Any] = {}
        self.checks: list[ConstantCheck] = []

    def get(self, name: str, K: int, *, iid: bool) -> Any:
        s = self.settings
        zeta = 0.0 if iid or int(K) == 1 else s.zeta  # one worker: no heterogeneity
        key = (name, int(K), zeta)
        if key not in self._cache:
            prob = problems.make_problem(
                name,
                K=int(K),
                d=s.d,
                noise=s.noise,
                sigma=s.sigma,
                zeta=zeta,
                seed=_child_seed(s.seed, 1, _stable_key(name)),
            )
            declared = {**s.declared.get("*", {}), **s.declared.get(name, {})}
            if declared:
                prob = apply_declared_constants(prob, declared, seed=s.seed)
                self.checks.append(
                    ConstantCheck(
                        problem=name,
                        K=int(K),
                        declared=declared,
                        result="consistent with sampling",
                        check=getattr(prob, "_declared_check", None),
                    )
                )
            self._cache[key] = prob
        return self._cache[key]


def apply_declared_constants(
    problem: Any, declared: Mapping[str, float], *, seed: int = 0, n: int = 256
) -> Any:
    """A copy of ``problem`` whose constants are replaced by the user's ``declared`` ones.

    The declared values are checked by :func:`theory.problems.check_constants` (sampling);
    a constant that sampling shows false raises :class:`UserInputError` saying which one and
    by how much. Allowed names: ``L``, ``sigma2``, ``zeta2``, ``f_star``.
    """
    allowed = ("L", "sigma2", "zeta2", "f_star")
    unknown = sorted(set(declared) - set(allowed))
    if unknown:
        raise UserInputError(f"cannot declare {unknown}: declarable constants are {list(allowed)}")
    for k, v in declared.items():
        v = float(v)
        if not math.isfinite(v) or (k != "f_star" and v < 0) or (k == "L" and v <= 0):
            raise UserInputError(
                f"declared constant {k} = {v} is invalid for problem "
                f"{getattr(problem, 'name', '?')!r}"
            )
    prob = problems.with_declared(problem, **{k: float(v) for k, v in declared.items()})
    rep = problems.check_constants(
        prob, n=n, rng=np.random.default_rng(_child_seed(seed, 2)), raise_on_violation=False
    )
    if rep.violations:
        ratios = rep.ratios()
        parts = []
        for v in rep.violations:
            key = v.split(":", 1)[0]
            if key in ratios and math.isfinite(ratios[key]):
                v += f" (measured/declared = {ratios[key]:.3g})"
            elif key == "f_star":
                v += f" (by {prob.f_star - rep.f_min_found:.3g})"
            parts.append(v)
        raise UserInputError(
            f"problem {prob.name!r} (K={prob.K}, d={prob.d}): declared constants contradicted "
            "by sampling: " + "; ".join(parts)
        )
    prob._declared_check = rep.to_dict()
    return prob


def problem_constants(problem: Any) -> dict[str, float]:
    """``L, sigma2, zeta2, f_star, F0`` and the bound's ``sigma``/``zeta`` (square roots)."""
    x0 = np.asarray(problem.x0(), dtype=float)
    F0 = float(problem.f(x0)) - float(problem.f_star)
    if F0 < 0:
        raise UserInputError(
            f"problem {problem.name!r}: f(x0) - f_star = {F0:.3g} < 0, so f_star is not a lower "
            "bound of f"
        )
    return {
        "L": float(problem.L),
        "sigma2": float(problem.sigma2),
        "zeta2": float(problem.zeta2),
        "f_star": float(problem.f_star),
        "F0": F0,
        "sigma": math.sqrt(float(problem.sigma2)),
        "zeta": math.sqrt(float(problem.zeta2)),
    }


# ------------------------------------------------------------------ bound values

_FIXED_PARAMS = {"beta": 0.0, "mu": 0.0}


def bound_values(
    bound: Bound, consts: Mapping[str, float], cfg: Mapping[str, Any]
) -> dict[str, float | np.ndarray]:
    """The parameter values a bound needs, from the problem's constants and a configuration.

    ``beta`` (relative noise) is 0 for the additive noise models here; ``R`` (rounds) is
    ``T/H``. Raises :class:`UserInputError` for a parameter no configuration supplies.
    """
    pool = {
        "L": consts["L"],
        "sigma": consts["sigma"],
        "zeta": consts["zeta"],
        "F0": consts["F0"],
        **_FIXED_PARAMS,
    }
    pool.update({k: cfg[k] for k in ("K", "H", "T", "p", "eta", "gamma", "alpha") if k in cfg})
    if "T" in cfg and "H" in cfg:
        pool["R"] = np.asarray(cfg["T"]) / np.asarray(cfg["H"])
    missing = [n for n in bound.parameters if n not in pool]
    if missing:
        raise UserInputError(
            f"bound {bound.name!r} depends on {missing}, which a simulation does not determine"
        )
    return {n: pool[n] for n in bound.parameters}


def _max_step(bound: Bound, vals: Mapping[str, Any]) -> np.ndarray:
    """The bound's largest feasible step at ``vals`` (a given step is ignored)."""
    return np.asarray(bound.max_step(**vals), dtype=float)


def _needs_iid(bound: Bound) -> bool:
    return any(a.key == "A3iid" for a in bound.assumptions)


def _feasible_step(
    bound: Bound, c: Mapping[str, float], cfg: dict[str, object], rng: Any, redraws: int
) -> tuple[dict[str, float | np.ndarray], float]:
    """The bound's values at ``cfg`` and its largest feasible step ``alpha_max``.

    With no feasible step (NaN) ``p`` and ``eta`` are redrawn in ``cfg`` (seeded, at most
    ``redraws`` times) as for an inside PALSGD configuration.
    """
    vals = bound_values(bound, c, {**cfg, "alpha": 1.0})
    amax = float(_max_step(bound, vals))
    for _ in range(redraws):
        if not math.isnan(amax):
            break
        cfg["p"] = float(rng.uniform(0.1, 0.5))
        cfg["eta"] = float(c["L"] * np.exp(rng.uniform(np.log(0.1), 0.0)))
        vals = bound_values(bound, c, {**cfg, "alpha": 1.0})
        amax = float(_max_step(bound, vals))
    return vals, amax


def _outside_step(c: Mapping[str, float], amax: float, frac: float) -> tuple[float, str]:
    """A step beyond the largest feasible one (``alpha_max * frac``, ``frac > 1``)."""
    top = amax if math.isfinite(amax) else 1.0 / c["L"]
    role = "outside" if math.isfinite(amax) or math.isnan(amax) else "fraction"
    return top * frac, role


def _inside_step(
    bound: Bound,
    vals: Mapping[str, Any],
    c: Mapping[str, float],
    amax: float,
    use_recommended: bool,
    frac: float,
) -> tuple[float, str]:
    """The recommended step (clipped to ``alpha_max``) or ``alpha_max * frac``, ``frac <= 1``."""
    top = amax if math.isfinite(amax) else 1.0 / c["L"]
    rec = bound.recommended_step_value(**vals)
    if use_recommended and rec is not None and np.isfinite(rec).all() and float(rec) > 0:
        alpha, role = min(float(rec), top), "recommended"
    else:
        alpha, role = top * frac, "fraction"
    if math.isnan(amax):  # no step satisfies the conditions here
        role = "outside"
    return alpha, role


def sample_configs(
    bound: Bound, problem_name: str, problems: ProblemCache, settings: VerifySettings, seed: int
) -> list[Config]:
    """Seeded random configurations of ``bound`` on one problem.

    ``K`` and ``T`` come from the settings' lists; ``H`` from {2, 4, 8, 16} (1 for SGD; ``T``
    is rounded up to a multiple of ``H``); ``p ~ U[0.1, 0.5]`` and ``eta = L * u`` with
    ``log u ~ U[log 0.1, log 1]`` for an algorithm with pulls; ``gamma ~ U[0.5, 1.5]`` when the
    bound depends on it (its spec's outer update: outer SGD). The step: about half of the inside configurations use the bound's
    recommended step (clipped to the largest feasible step ``alpha_max``), the others
    ``alpha_max * u`` with ``log u ~ U[log 0.05, 0]``; outside configurations use
    ``alpha_max * u`` with ``u ~ U[1.2, 1.8]``.
    """
    rng = np.random.default_rng(seed)
    spec = bound_spec(bound)
    row = spec.definition
    n_in, n_out = settings.configs, settings.outside
    n = n_in + n_out
    if n == 0:
        return []
    Ks = rng.choice(np.asarray(settings.K), size=n)
    Ts = rng.choice(np.asarray(settings.T), size=n)
    uses = set(bound.parameters)
    Hs = rng.choice([2, 4, 8, 16], size=n) if row.rounds else np.ones(n, dtype=int)
    Ts = (np.ceil(Ts / Hs) * Hs).astype(int)
    ps = rng.uniform(0.1, 0.5, size=n) if row.pulls else np.zeros(n)
    eta_u = np.exp(rng.uniform(np.log(0.1), 0.0, size=n))
    gammas = rng.uniform(0.5, 1.5, size=n) if "gamma" in uses else np.ones(n)
    frac_in = np.exp(rng.uniform(np.log(0.05), 0.0, size=n))
    frac_out = rng.uniform(1.2, 1.8, size=n)
    use_rec = rng.random(size=n) < 0.5
    iid = _needs_iid(bound)
    out: list[Config] = []
    for i in range(n):
        K = int(Ks[i])
        prob = problems.get(problem_name, K, iid=iid)
        c = problem_constants(prob)
        eta = float(c["L"] * eta_u[i]) if row.pulls else 0.0
        cfg = {
            "K": K,
            "H": int(Hs[i]),
            "T": int(Ts[i]),
            "p": float(ps[i]),
            "eta": eta,
            "gamma": float(gammas[i]),
        }
        redraws = 20 if row.pulls and i < n_in else 0
        vals, amax = _feasible_step(bound, c, cfg, rng, redraws)
        eta = cfg["eta"]
        ps[i] = cfg["p"]
        if i >= n_in:
            alpha, role = _outside_step(c, amax, float(frac_out[i]))
        else:
            alpha, role = _inside_step(bound, vals, c, amax, bool(use_rec[i]), float(frac_in[i]))
        out.append(
            Config(
                bound=bound.name,
                problem=problem_name,
                algorithm=spec,
                K=K,
                T=int(Ts[i]),
                alpha=alpha,
                H=int(Hs[i]),
                p=float(ps[i]),
                eta=eta,
                gamma=float(gammas[i]),
                alpha_role=role,
                alpha_max=amax,
                seed=_child_seed(seed, 3, i),
                problem_kwargs=(("zeta", 0.0 if iid or K == 1 else settings.zeta),),
                backend=settings.backend,
                device=settings.device,
            )
        )
    return out
