# ---
# jupyter:
#   jupytext:
#     formats: ipynb,py:percent
#     text_representation:
#       extension: .py
#       format_name: percent
#       format_version: '1.3'
#       jupytext_version: 1.19.6
#   kernelspec:
#     display_name: Python 3 (ipykernel)
#     language: python
#     name: python3
# ---

# %% [markdown]
# # 07 · The worst problem of the class
#
# A bound is a statement about a **class** of problems, not about the instances a verifier
# happens to try. The class of the toolkit's Local SGD bounds, at $\sigma = 0$ (exact
# gradients):
#
# * $K$ functions $f_k$, each $L$-smooth (nonconvex allowed), $f = \frac1K\sum_k f_k$ (A1);
# * heterogeneity (A3): $\frac1K\sum_k \|\nabla f_k(y) - \nabla f(y)\|^2 \le \zeta^2$;
# * initial gap (A4): $f(x_0) - \inf f \le F_0$, used as the two inequalities
#   $f(x_0) - f(y) \le F_0$ and $f(y) - (f(x_0) - F_0) \ge \|\nabla f(y)\|^2/(2L)$.
#
# The **class oracle** (`theory.worstcase`, `palsgd worst-case`) computes the largest value of
# the measured quantity, here $\frac1T\sum_{t<T}\|\nabla f(\bar x_t)\|^2$, over *every*
# problem of that class: a performance-estimation problem (PEP), an SDP whose variables are the
# Gram matrix of the start and of every gradient the method sees, and the function values
# (PEPit, solved by Clarabel). A3 and A4 are imposed **at the points the method visits only**,
# so the value $W$ is an **upper bound on the true worst case**: a bound $B \ge W$ holds for
# every problem of the class at that design (certified). The `compact` relaxation imposes them
# at the points all workers share (averages, anchors): looser in principle, and its value is
# **the same for every $K \ge 2$** (`docs/verification.md`, "The class oracle").
#
# This notebook puts three numbers side by side for Local SGD ($K = 2$ workers, model
# averaging every $H$ steps, $\zeta = 1$, $F_0 = 1$, $L = 1$):
#
# 1. the **class worst case** $W$ (`worst_case(..., relaxation="compact")`);
# 2. the **bound** `local_sgd_noniid` (Wang and Joshi), marked where outside its conditions;
# 3. the **instances' worst**: the larger of the toolkit's two exact instance families, the
#    quadratic bowl (`local_sgd_quadratic_lower`) and the two-curvature heterogeneous instances
#    (`local_sgd_heterogeneity_lower`). Both are problems of the class, so both must be
#    $\le W$.
#
# Then it builds an explicit worst function (`theory.worstcase.lift`) and draws it along the
# path the method takes on it.

# %%
# %matplotlib inline
import time

import matplotlib.pyplot as plt
import numpy as np
from matplotlib.ticker import FormatStrFormatter, LogLocator, NullFormatter

from theory.bounds import get
from theory.lower import get_lower
from theory.nbtools import fmt, md_table, output_dir, write_csv
from theory.worstcase import design_of, worst_case
from theory.worstcase.judge import SOLVER_RTOL
from theory.worstcase.lift import lift, signs

OUT = output_dir("07_worst_problem_of_the_class")
print("data files go to", OUT)

CLASS = dict(L=1.0, zeta=1.0, F0=1.0, K=2)
BOUND = get("local_sgd_noniid")
QUAD, HET = get_lower("local_sgd_quadratic_lower"), get_lower("local_sgd_heterogeneity_lower")
START = time.perf_counter()

# %% [markdown]
# ## 1. One small SDP for every $K$
#
# The compact relaxation's value does not depend on $K \ge 2$ when the workers are
# exchangeable (Local SGD has no coins): symmetrise an optimal solution over the workers'
# permutations, write each worker's vectors as a common part plus a deviation that sums to
# zero over the workers, and every constraint and the objective depend only on the Gram blocks
# of the common part and of one deviation. Measured at the design of `docs/verification.md`
# (anchors, $H = 2$, $R = 2$, $\alpha = 0.1$): the same value at $K = 2, 3, 4$, and the full
# relaxation (A3 and A4 at every worker's iterates too) gives it at $K = 2$.

# %%
DOC = dict(L=1.0, zeta=1.0, F0=1.0, alpha=0.1, H=2, R=2, measured="anchors")
rows = []
for K, rel in ((2, "compact"), (3, "compact"), (4, "compact"), (2, "full")):
    wc = worst_case("local_sgd", relaxation=rel, K=K, **DOC)
    rows.append({"K": K, "relaxation": rel, "W": wc.value, "status": wc.status,
                 "points per f_k": wc.points, "seconds": wc.elapsed_s})  # fmt: skip
md_table([{**r, "W": fmt(r["W"], ".6f"), "seconds": fmt(r["seconds"], ".2f")} for r in rows],
         list(rows[0]))  # fmt: skip
write_csv(OUT / "every_K.csv", rows)
values = [r["W"] for r in rows]
assert max(values) - min(values) <= 1e-5 * max(values), values

# %% [markdown]
# ## 2. Over the step $\alpha$ ($H = 2$, $T = 6$)
#
# For each step: $W$, the bound $B$ (and whether its conditions $\alpha L \le 1$,
# $6\alpha^2L^2H(H-1) \le 1/2$ hold), the two instance families and their maximum. The class
# tightness $W/B$ is how much of the bound the worst problem of the class uses; instances$/W$
# is how close the toolkit's own instances come to that worst problem.


# %%
def compare(alpha: float, H: int, T: int = 6) -> dict:
    """Class worst case, bound and instances' worst at one design (sigma = 0)."""
    K, L, zeta, F0 = CLASS["K"], CLASS["L"], CLASS["zeta"], CLASS["F0"]
    wc = worst_case("local_sgd", relaxation="compact", T=T, alpha=alpha, H=H, **CLASS)
    args = dict(L=L, sigma=0.0, zeta=zeta, F0=F0, K=K, H=H, T=T, alpha=alpha)
    quad = float(QUAD.evaluate(alpha=alpha, L=L, sigma=0.0, K=K, T=T, F0=F0))
    het = float(HET.evaluate(alpha=alpha, L=L, zeta=zeta, K=K, H=H, T=T))
    inst = max(quad, het)
    # both families are problems of the class: neither may exceed its worst case
    assert inst <= wc.value * (1 + SOLVER_RTOL), (alpha, H, inst, wc.value)
    return {
        "alpha": alpha, "H": H, "T": T, "class W": wc.value, "status": wc.status,
        "bound B": float(BOUND.evaluate(**args)), "inside": bool(BOUND.conditions_hold(**args)),
        "quadratic": quad, "heterogeneity": het, "instances' worst": inst,
        "seconds": wc.elapsed_s,
    }  # fmt: skip


def show(rows: list[dict], name: str) -> None:
    table = [{**r, "class W": fmt(r["class W"], ".5f"), "bound B": fmt(r["bound B"], ".4g"),
              "quadratic": fmt(r["quadratic"], ".5f"),
              "heterogeneity": fmt(r["heterogeneity"], ".2e"),
              "instances' worst": fmt(r["instances' worst"], ".5f"),
              "W / B": fmt(r["class W"] / r["bound B"], ".3f"),
              "instances / W": fmt(r["instances' worst"] / r["class W"], ".4f"),
              "seconds": fmt(r["seconds"], ".2f")} for r in rows]  # fmt: skip
    cols = ["alpha", "H", "class W", "bound B", "inside", "W / B", "quadratic", "heterogeneity",
            "instances' worst", "instances / W", "seconds"]  # fmt: skip
    md_table(table, cols)
    write_csv(OUT / name, rows)


ALPHAS = (0.05, 0.1, 0.2, 0.4, 0.8)
by_alpha = [compare(a, H=2) for a in ALPHAS]
show(by_alpha, "by_alpha.csv")

# %% [markdown]
# ## 3. Over the sync interval $H$ ($T = 6$, $\alpha = 0.1$)
#
# $H = 1$ averages after every step: Local SGD is then gradient descent on $f$ and the
# heterogeneity plays no part; the quadratic bowl is the worst problem of the class there. A
# longer $H$ lets the workers drift apart and the class worst case grows; the quadratic
# instance does not see it (with one Hessian the average follows gradient descent for every
# $H$), and the two-curvature family, built for long horizons, is far below at $T = 6$.

# %%
HS = (1, 2, 3, 6)
by_H = [next(r for r in by_alpha if r["alpha"] == 0.1) if h == 2 else compare(0.1, H=h) for h in HS]
show(by_H, "by_H.csv")

# %% [markdown]
# The three curves (log scale). Filled markers: the bound inside its conditions; open
# markers: outside them (where the bound states nothing).


# %%
def draw(ax, rows: list[dict], x: str) -> None:
    xs = np.array([r[x] for r in rows], float)
    b = np.array([r["bound B"] for r in rows])
    inside = np.array([r["inside"] for r in rows])
    ax.plot(xs, b, "-", color="C0", label="bound local_sgd_noniid")
    ax.plot(xs[inside], b[inside], "o", color="C0")
    ax.plot(xs[~inside], b[~inside], "o", mfc="none", color="C0",
            label="bound, outside its conditions")  # fmt: skip
    ax.plot(xs, [r["class W"] for r in rows], "s-", color="C3",
            label="class worst case W (compact)")  # fmt: skip
    ax.plot(xs, [r["instances' worst"] for r in rows], "k^--", label="instances' worst")
    ax.set_xscale("log")
    ax.set_yscale("log")
    ax.set_xticks(xs, [f"{v:g}" for v in xs])
    ax.xaxis.set_minor_formatter(NullFormatter())
    ax.yaxis.set_major_locator(LogLocator(subs=(1.0, 2.0, 5.0)))
    ax.yaxis.set_major_formatter(FormatStrFormatter("%g"))
    ax.yaxis.set_minor_formatter(NullFormatter())
    ax.set_xlabel(x)


fig, axes = plt.subplots(1, 2, figsize=(11, 4))
draw(axes[0], by_alpha, "alpha")
axes[0].set_title(r"over $\alpha$ ($K=2$, $H=2$, $T=6$)")
axes[0].set_ylabel(r"$\frac{1}{T}\sum_t \|\nabla f(\bar x_t)\|^2$")
draw(axes[1], by_H, "H")
axes[1].set_ylim(1.0, None)
axes[1].set_title(r"over $H$ ($K=2$, $\alpha=0.1$, $T=6$)")
axes[1].legend(fontsize=8)
plt.tight_layout()
plt.show()

# %% [markdown]
# ## 4. The worst function, made explicit
#
# $W$ is a relaxation's value. `lift(design)` looks for explicit functions of the class that
# reach it: one-dimensional $f_k = \phi \pm \zeta x$ (the signs balanced over the workers, so
# A3 holds with equality everywhere), $\phi$ a $C^1$ piecewise quadratic with curvature in
# $[-L, L]$, built from the values and slopes at the visited points and **checked everywhere**
# (its curvature, and $f(x_0) - \inf f \le F_0$ by its exact infimum); the method is then run
# again on it and only that recomputed value is reported. It is a lower bound on the true
# worst case, so it must be $\le W$.
#
# Units: the oracle solves a normalised problem ($L = 1$, unit $u = \max(LF_0, \zeta^2)$ of a
# squared gradient, $x$ scaled by $\sqrt u/L$; `design.unit`, `design.normalised()`); here
# $u = 1$ and the normalised units are the design's own. One lift, at the first design of
# section 2 ($\alpha = 0.05$, $H = 2$, $T = 6$).

# %%
design = design_of("local_sgd", T=6, alpha=0.05, H=2, **CLASS)
W = next(r["class W"] for r in by_alpha if r["alpha"] == 0.05)
t0 = time.perf_counter()
lifted = lift(design)
lift_s = time.perf_counter() - t0
assert lifted.value is not None, "no start gave a valid function"
assert lifted.value <= W * (1 + SOLVER_RTOL), (lifted.value, W)
phi = lifted.phi
spec, zeta_n, F0_n = design.normalised()
print(f"unit u = {design.unit:g}; normalised zeta = {zeta_n:g}, F0 = {F0_n:g}")
print("checks:", {k: fmt(v, ".6g") for k, v in lifted.checks.items()})

# the method run once more, by hand: K workers, H local gradient steps, then the average
zs = zeta_n * signs(design.K)
x = np.zeros(design.K)
avg, local = [], []  # avg[t]: xbar_t (measured); local[t]: the workers after step t
for t in range(design.T):
    avg.append(x.mean())
    x = x - spec.alpha * np.array([phi.deriv(xk) + zs[k] for k, xk in enumerate(x)])
    local.append(x.copy())
    if (t + 1) % spec.H == 0:
        x = np.full(design.K, x.mean())
local = np.array(local)
by_hand = float(np.mean([phi.deriv(a) ** 2 for a in avg])) * design.unit
assert np.isclose(by_hand, lifted.value, rtol=1e-9), (by_hand, lifted.value)

q = next(r["quadratic"] for r in by_alpha if r["alpha"] == 0.05)
rows = [{"class W (compact)": fmt(W, ".6f"), "lifted (explicit)": fmt(lifted.value, ".6f"),
         "lifted / W": fmt(lifted.value / W, ".4f"), "quadratic instance": fmt(q, ".6f"),
         "lift seconds": fmt(lift_s, ".1f")}]  # fmt: skip
md_table(rows, list(rows[0]))
write_csv(OUT / "lifted.csv", [{"W": W, "lifted": lifted.value, "by_hand": by_hand,
                                "quadratic": q, "lift_s": lift_s, **lifted.checks}])  # fmt: skip
write_csv(OUT / "lifted_path.csv", [{"t": t, "xbar": a, "grad2": phi.deriv(a) ** 2}
                                    for t, a in enumerate(avg)])  # fmt: skip

# %% [markdown]
# Left: $\phi$ over the range of the path, with $f_{1,2} = \phi \pm \zeta x$ (thin), every
# point the method visits on it (each worker's iterates, and the averages where the gradient
# norm is measured). Right: the same path in time; the workers drift apart during a round and
# meet at each average.

# %%
path = np.array(lifted.path)
lo, hi = path.min(), path.max()
pad = 0.1 * (hi - lo)
xs = np.linspace(lo - pad, hi + pad, 400)
ph = np.array([phi(v) for v in xs])
fig, (ax, ax2) = plt.subplots(1, 2, figsize=(11, 4))
ax.plot(xs, ph, "k-", lw=2, label=r"$\phi$")
for k, s in enumerate(zs):
    sign = "+" if s > 0 else "-"
    ax.plot(xs, ph + s * xs, lw=0.8, color=f"C{k}", alpha=0.6,
            label=rf"$f_{k + 1} = \phi {sign} \zeta x$")  # fmt: skip
for k in range(design.K):
    ax.plot(local[:, k], [phi(v) for v in local[:, k]], "v^"[k % 2], color=f"C{k}", ms=7,
            ls="none", label=f"worker {k + 1}'s iterates")  # fmt: skip
ax.plot(avg, [phi(v) for v in avg], "ko", mfc="none", ms=9, label=r"averages $\bar x_t$ (measured)")
ax.plot([0.0], [phi(0.0)], "k*", ms=14, label=r"$x_0$")
ax.plot(path, [phi(v) for v in path], "|", color="grey", ms=12, label="visited (lift.path)")
ax.set_xlabel("x (normalised)")
ax.set_ylabel(r"$\phi(x)$")
ax.set_title(rf"lifted worst function: {fmt(lifted.value, '.5f')} vs class W {fmt(W, '.5f')}")
ax.legend(fontsize=7)
for k in range(design.K):
    for r in range(design.T // spec.H):  # one segment per round, from the round's start
        ts = np.arange(r * spec.H, (r + 1) * spec.H + 1)
        xk = [avg[r * spec.H], *local[r * spec.H:(r + 1) * spec.H, k]]
        ax2.plot(ts, xk, "v^"[k % 2] + "-", color=f"C{k}",
                 label=f"worker {k + 1}" if r == 0 else None)  # fmt: skip
ax2.plot(np.arange(design.T), avg, "ko--", mfc="none", label=r"$\bar x_t$")
for t in range(spec.H, design.T, spec.H):
    ax2.axvline(t, color="grey", lw=0.5)
ax2.set_xlabel("step t (grey: averaging)")
ax2.set_ylabel("x (normalised)")
ax2.legend(fontsize=8)
plt.tight_layout()
plt.show()
print(f"compute: {time.perf_counter() - START:.1f} s")

# %% [markdown]
# Reading: at this small step the explicit function reaches the class value to about 0.1%:
# the relaxation is essentially tight here, and the worst problem found is the quadratic bowl
# of curvature $L$ along the whole path (the toolkit's quadratic instance), tilted apart by
# $\pm\zeta x$ per worker. At larger steps (section 2, $\alpha \ge 0.2$) $W$ sits above both
# instance families, and the lift closes only part of the gap: measured when this notebook was
# written (default `lift`, 11-19 s each), it reaches 98% of $W$ at $\alpha = 0.2$, 92.5% at
# $\alpha = 0.4$ and 80% at $\alpha = 0.8$, each above the quadratic instance. Between the lift
# and $W$ lies either slack of the relaxation (A3 and A4 imposed at the visited points only) or
# worse problems the one-dimensional search does not find; the class value still certifies
# every bound at or above it. From the command line:
# `palsgd worst-case --algorithm local_sgd --K 2 --H 2 --T 6 --alpha 0.4 --zeta 1 --lift`;
# `palsgd verify` runs the same oracle as its class stage for every bound.
