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
# # 06 · When pulling pays
#
# Theorem 1 (`docs/palsgd_proof.md`) treats the pull as a cost: it never allows a larger
# sync interval $H$ than Local SGD. Theorem 2 (`docs/anchor_theorem.md`, derived here)
# follows the anchors $z_r$ instead, covers an outer learning rate $\gamma$ and outer
# momentum $\mu$, and, for $\eta > L$, uses the pull as a force: each worker's mean step
# is a gradient step on the $(\eta - L)$-strongly convex $f_k + \frac\eta2\|x - z\|^2$, so
# the drift horizon is $\min(H - 1, 2/(\alpha(\eta - L)))$ instead of $H$.
#
# This notebook shows
#
# 1. the $(H, \eta)$ map of the communication rounds each guarantee needs to reach
#    $\varepsilon$: the pull-aware bound `palsgd_pull_aware` (best outer rate of a small
#    grid) against the best Local SGD bound (`local_sgd_ours`, `local_sgd_noniid`,
#    `local_sgd_outer`), at the same $H$ and at equal gradient evaluations per round;
# 2. the exact dynamics on the same grid (`theory.moments`, per-eigendirection moment
#    recursions): end-of-round consensus error and anchor gradient norm;
# 3. exact consensus and gradient-norm curves for one $H$;
# 4. every bound beside the lower bounds (quadratic and heterogeneity) against $H$.
#
# Notation (the PALSGD authors'): $K$ workers, $H$ local steps per round (pull steps
# count), $p$ pull probability, $\alpha$ inner learning rate, $\eta$ pull rate, $\gamma$
# outer learning rate, $L$, $\sigma^2$, $\zeta^2$, $F_0$ the problem constants.
# The two kinds of bound average different things (anchors vs every step's averaged
# iterate); both bound an average squared gradient norm of the model the method returns.

# %%
# %matplotlib inline
import warnings

import matplotlib.pyplot as plt
import numpy as np

warnings.filterwarnings("ignore", message="IProgress not found")  # tqdm without ipywidgets

from theory.bounds import get
from theory.bounds.maps import exact_map, heterogeneous_quadratic, rounds_map
from theory.lower import get_lower
from theory.moments import exact_moments
from theory.nbtools import fmt, md_table, output_dir, write_csv

OUT = output_dir("06_when_pulling_pays")
print("data files go to", OUT)

# %% [markdown]
# ## 1. Rounds to $\varepsilon$: pull-aware bound vs the best Local SGD bound
#
# $L = 1$, $\sigma = 1$, $\zeta = 3$, $K = 4$, $F_0 = 1$, $\varepsilon = 0.05$, $p = 0.5$.
# A ratio below 1 means the pull-aware guarantee needs fewer rounds.

# %%
CONSTS = dict(L=1.0, sigma=1.0, zeta=3.0, K=4, F0=1.0)
EPS, P = 0.05, 0.5
H_GRID = [16, 64, 256, 1024]
ETA_GRID = [5.0, 20.0, 50.0, 200.0]
m = rounds_map(**CONSTS, eps=EPS, p=P, H_values=H_GRID, eta_values=ETA_GRID)
rows = []
for i, H in enumerate(m["H"]):
    row = {"H": int(H), "best Local SGD": fmt(m["local"][i], ".4g"),
           "Local SGD, equal grads": fmt(m["local_equal_grads"][i], ".4g")}
    for j, eta in enumerate(m["eta"]):
        row[f"eta={eta:g}"] = (f"{fmt(m['pull'][i, j], '.4g')} "
                               f"(x{fmt(m['ratio'][i, j], '.2f')}, gamma={fmt(m['pull_gamma'][i, j], '.3g')})")
    rows.append(row)
md_table(rows, list(rows[0]))
write_csv(OUT / "rounds_map.csv", rows)

fig, ax = plt.subplots(figsize=(6.5, 4.2))
im = ax.imshow(np.log2(m["ratio"]), cmap="RdBu_r", vmin=-3, vmax=3, aspect="auto")
ax.set_xticks(range(len(ETA_GRID)), [f"{e:g}" for e in ETA_GRID])
ax.set_yticks(range(len(H_GRID)), [str(h) for h in H_GRID])
ax.set_xlabel(r"pull rate $\eta$")
ax.set_ylabel("H")
for i in range(len(H_GRID)):
    for j in range(len(ETA_GRID)):
        ax.text(j, i, fmt(m["ratio"][i, j], ".2f"), ha="center", va="center", fontsize=9)
fig.colorbar(im, ax=ax, label=r"$\log_2$(rounds pull-aware / rounds best Local SGD)")
ax.set_title("rounds to eps: blue = the pull pays")
plt.show()

# %% [markdown]
# ## 2. Exact dynamics on the same grid
#
# A heterogeneous quadratic with $L = 1$ ($K = 4$, eigenvalues 1 and 1/4, centred Gaussian
# centres), $\alpha = 0.01$, $p = 0.5$, 4 rounds, $\sigma = 0$: the end-of-round consensus
# error $\mathbb E\frac1K\sum_k\|x_k - \bar x\|^2$ of PALSGD stops growing once
# $H \gtrsim 1/(\alpha\eta)$, while Local SGD's keeps growing with $H$.

# %%
prob = heterogeneous_quadratic(K=4, seed=0)
ex = exact_map(prob, alpha=0.01, p=P, H_values=H_GRID, eta_values=ETA_GRID, rounds=4)
rows = []
for i, H in enumerate(ex["H"]):
    row = {"H": int(H), "Local SGD": fmt(ex["local_consensus"][i], ".3g")}
    row.update({f"eta={e:g}": fmt(ex["consensus"][i, j], ".3g") for j, e in enumerate(ex["eta"])})
    rows.append(row)
print("end-of-round consensus error")
md_table(rows, list(rows[0]))
write_csv(OUT / "exact_consensus.csv", rows)
rows = []
for i, H in enumerate(ex["H"]):
    row = {"H": int(H), "Local SGD": fmt(ex["local_grad"][i], ".3g")}
    row.update({f"eta={e:g}": fmt(ex["grad"][i, j], ".3g") for j, e in enumerate(ex["eta"])})
    rows.append(row)
print("E||grad f(z_R)||^2 after the last sync")
md_table(rows, list(rows[0]))

# %% [markdown]
# ## 3. Exact curves at $H = 512$
#
# Consensus error and $\|\nabla f(\bar x_t)\|^2$ over two rounds, Local SGD against PALSGD
# at several pull rates. The plateau sets in after a few multiples of $1/(\alpha\eta)$ steps.

# %%
H, ROUNDS = 512, 2
fig, axes = plt.subplots(1, 2, figsize=(11, 3.8))
curves = {"Local SGD": dict(kind="local_sgd", alpha=0.01, H=H)}
curves.update({f"PALSGD eta={e:g}": dict(kind="palsgd", alpha=0.01, H=H, p=P, eta=e)
               for e in (2.0, 10.0, 50.0)})
for i, (name, spec) in enumerate(curves.items()):
    c = exact_moments(prob, spec, T=ROUNDS * H)
    axes[0].semilogy(c.steps, np.maximum(c.consensus, 1e-12), color=f"C{i}", label=name)
    axes[1].semilogy(c.steps, np.maximum(c.grad_norm_sq, 1e-12), color=f"C{i}", label=name)
axes[0].set_title("consensus error (exact)")
axes[1].set_title(r"$\|\nabla f(\bar x_t)\|^2$ (exact)")
for ax in axes:
    ax.set_xlabel("step $t$")
axes[0].legend()
plt.show()

# %% [markdown]
# ## 4. Every bound beside the lower bounds
#
# At one step $\alpha = 0.005$ ($L = \sigma = \zeta = F_0 = 1$, $K = 4$, $T = 8192$): the
# upper bounds on $\frac1T\sum_t \mathbb E\|\nabla f(\bar x_t)\|^2$ against $H$, and the two
# lower bounds of `theory.lower` (`docs/lower_bounds.md`). The quadratic one is the exact
# value on $(L/2)\|x\|^2$ with noise; it does not depend on $H$. The heterogeneity one is
# the exact value on two-curvature instances whose workers' Hessians differ; it grows with
# $H$. No valid bound can be below the larger of the two. A bound is drawn only where its
# conditions hold. PALSGD ($p = 0.5$, $\eta = 2$) is compared with the coin version of the
# heterogeneity lower bound; the quadratic one is stated for Local SGD only.

# %%
BASE = dict(L=1.0, sigma=1.0, zeta=1.0, F0=1.0, K=4, T=8192, alpha=0.005)
H_LINE = np.array([1, 2, 4, 8, 16, 32, 64, 128, 256])
PULL = dict(p=0.5, eta=2.0)
quad, het = get_lower("local_sgd_quadratic_lower"), get_lower("local_sgd_heterogeneity_lower")
no_noise = {k: v for k, v in BASE.items() if k not in ("sigma", "F0")}
lines = {
    "quadratic lower": [float(quad.evaluate(**{k: v for k, v in BASE.items() if k != "zeta"}))]
    * len(H_LINE),
    "heterogeneity lower": [het.evaluate(**no_noise, H=int(h)) for h in H_LINE],
    "heterogeneity lower, PALSGD": [het.evaluate(**no_noise, H=int(h), **PULL) for h in H_LINE],
}
for name, extra in (("local_sgd_noniid", {}), ("local_sgd_ours", {}), ("palsgd", PULL)):
    b = get(name)
    vals = {**BASE, **extra, "H": H_LINE.astype(float)}
    lines[name] = np.where(b.conditions_hold(**vals), b.evaluate(**vals), np.nan).tolist()
rows = [{"H": int(h), **{k: fmt(v[i], ".4g") for k, v in lines.items()}} for i, h in enumerate(H_LINE)]
md_table(rows, list(rows[0]))
write_csv(OUT / "bounds_and_lower_bounds.csv", rows)

fig, axes = plt.subplots(1, 2, figsize=(11, 3.8), sharey=True)
for name in ("local_sgd_noniid", "local_sgd_ours"):
    axes[0].loglog(H_LINE, lines[name], "o-", label=name)
for name in ("quadratic lower", "heterogeneity lower"):
    axes[0].loglog(H_LINE, lines[name], "k--" if "quad" in name else "k:", label=name)
axes[1].loglog(H_LINE, lines["palsgd"], "o-", color="C2", label="palsgd (p=0.5, eta=2)")
axes[1].loglog(H_LINE, lines["heterogeneity lower, PALSGD"], "k:", label="heterogeneity lower")
axes[0].set_title("Local SGD")
axes[1].set_title("PALSGD")
for ax in axes:
    ax.set_xlabel("H")
    ax.legend(fontsize=8)
axes[0].set_ylabel(r"$\frac{1}{T}\sum_t E\|\nabla f(\bar x_t)\|^2$")
plt.show()
