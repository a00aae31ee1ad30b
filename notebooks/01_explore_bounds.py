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
# # 01 · Exploring the encoded convergence bounds
#
# This notebook shows every convergence bound encoded in the toolkit (`theory.bounds`),
# how each depends on the hyperparameters, and how to type in a bound of your own and run
# the same checks on it.
#
# Every bound has the form
#
# $$\frac{1}{T}\sum_{t<T}\mathbb{E}\|\nabla f(\bar x_t)\|^2 \;\le\; B(L,\sigma,\zeta,F_0,K,H,p,\alpha,\eta,T)$$
#
# and holds only where its step-size conditions hold. Notation (the PALSGD authors'):
#
# | symbol | meaning | authors' code |
# |---|---|---|
# | $K$ | workers | `world_size` |
# | $H$ | local steps between syncs (pull steps count) | `sync_interval` |
# | $p$ | probability of a pull step | `prob_no_grad` |
# | $\alpha$ | inner learning rate | `lr` |
# | $\eta$ | pull (mixing) rate; a pull moves $x \leftarrow x - (\alpha\eta/p)(x - z)$ | `eta` |
# | $T$ | local steps in total ($T = RH$ for $R$ rounds) | |
# | $L,\ \sigma^2,\ \zeta^2,\ F_0$ | smoothness, gradient noise, heterogeneity, initial gap | |
#
# A PALSGD step is, with probability $p$, a *pull* towards the anchor $z$ (the global
# model at the last sync; no gradient is computed), and otherwise a gradient step
# $x \leftarrow x - \frac{\alpha}{1-p}\, g(x)$; every $H$ steps the workers' models are
# averaged into $z$ and every worker restarts from it. $p = 0$ is Local SGD, and $H = 1$
# with $p = 0$ is minibatch SGD.
#
# Everything below runs on the CPU in seconds and writes its data (CSV/JSON) into a
# temporary directory, never into the repository.

# %%
# %matplotlib inline
import json

import matplotlib.pyplot as plt
import numpy as np
import sympy as sp
from IPython.display import Markdown, Math, display

import theory
from theory.check import check
from theory.nbtools import fmt, md_table, output_dir, write_csv
from core.errors import UserInputError

OUT = output_dir("01_explore_bounds")
print("data files go to", OUT)

# %% [markdown]
# ## The registry
#
# After `import theory`, `theory.bounds.all_bounds()` lists every registered bound. *Published* bounds are
# encoded from the cited paper; *derived here* marks the project's own theorems, whose
# proofs are machine-checked lemma by lemma (`theory/proofs`, written out in `docs/`).

# %%
BOUNDS = theory.bounds.all_bounds()
get = theory.bounds.get
md_table(
    [
        {
            "name": f"`{b.name}`",
            "title": b.title,
            "algorithms": ", ".join(b.algorithms),
            "parameters": ", ".join(b.parameters),
            "source": "derived here" if b.derived_here else "published",
        }
        for b in BOUNDS
    ],
    ["name", "title", "algorithms", "parameters", "source"],
)

# %% [markdown]
# ## Each bound in LaTeX, with its conditions and assumptions
#
# `Bound.latex()` renders the statement and its step-size conditions; the assumptions are
# named objects (A1 smoothness, A2 noise, A3 heterogeneity, A4 lower bound, S1 inner SGD,
# S2 outer averaging, ...).

# %%
for b in BOUNDS:
    display(Markdown(f"### `{b.name}`: {b.title}\n\n*Source:* {b.provenance}"))
    display(Math(b.latex()))
    for c in b.conditions:
        display(Markdown(f"- condition **{c.name}**: {c.description or c.relation}"))
    display(Markdown("*Assumptions:* " + "; ".join(f"{a.key} {a.name}" for a in b.assumptions)))

# %% [markdown]
# ## A reference configuration
#
# The sweeps below change one hyperparameter at a time around this configuration. The
# data are i.i.d. ($\zeta = 0$) so that every bound, including those assuming i.i.d. data,
# applies; heterogeneity is swept separately at the end of this section. A parameter a
# bound does not use is simply ignored by it. A bound is callable: `b(**REF)` is its value
# there (the same as `b.evaluate(**REF)`), and `theory.at_optimal_step(b, **values)` gives
# the step minimising it under the conditions with the value there (`.alpha`, `.value`;
# NaN where no step meets the conditions). Both are vectorised over array parameters.

# %%
REF = dict(L=1.0, sigma=1.0, zeta=0.0, F0=1.0, K=4, H=8, T=10_000, p=0.2, eta=0.5, alpha=0.01,
           gamma=1.0, mu=0.0)
md_table([{k: v for k, v in REF.items()}], list(REF))
print("palsgd at the reference configuration:", fmt(get("palsgd")(**REF)))


# %% [markdown]
# ## The bound versus the learning rate $\alpha$
#
# Solid lines: the conditions hold; dotted: they fail (the bound does not apply there).
# The dot marks the step that minimises the bound under the conditions
# (`Bound.optimal_step`), the vertical tick the largest step meeting the conditions
# (`Bound.max_step`). Every bound trades the optimisation term $\propto F_0/(\alpha T)$
# against noise and drift terms that grow with $\alpha$.

# %%
alphas = np.logspace(-4, 0, 241)
rows = []
fig, ax = plt.subplots(figsize=(7, 4.2))
for i, b in enumerate(BOUNDS):
    vals = {**REF, "alpha": alphas}
    v = b(**vals)
    ok = b.conditions_hold(**vals)
    color = f"C{i}"
    ax.loglog(alphas, np.where(ok, v, np.nan), color=color, label=b.name)
    ax.loglog(alphas, np.where(ok, np.nan, v), color=color, ls=":", alpha=0.6)
    opt = theory.at_optimal_step(b, **REF)
    a_max = float(b.max_step(**REF))
    if np.isfinite(opt.alpha):
        ax.plot(opt.alpha, opt.value, "o", color=color)
    if np.isfinite(a_max):
        ax.axvline(a_max, color=color, lw=0.8, ymax=0.08)
    rows += [
        {"bound": b.name, "alpha": a, "value": x, "conditions_hold": bool(h)}
        for a, x, h in zip(alphas, v, ok, strict=True)
    ]
ax.set_xlabel(r"inner learning rate $\alpha$")
ax.set_ylabel("bound on mean squared gradient norm")
ax.set_ylim(1e-3, 1e2)
ax.legend(fontsize=8)
ax.set_title("bound vs alpha (reference configuration)")
plt.show()
write_csv(OUT / "sweep_alpha.csv", rows)

md_table(
    [
        {
            "bound": b.name,
            "optimal alpha": fmt(theory.at_optimal_step(b, **REF).alpha),
            "bound at optimum": fmt(theory.at_optimal_step(b, **REF).value),
            "largest feasible alpha": fmt(b.max_step(**REF)),
        }
        for b in BOUNDS
    ],
    ["bound", "optimal alpha", "bound at optimum", "largest feasible alpha"],
)

# %% [markdown]
# ## The bound versus the sync interval $H$
#
# At every $H$ the step is re-optimised. Longer rounds save communication but let the
# workers drift apart, which the drift terms ($\propto \alpha^2 L^2 (H-1)$) charge for.
# The marker on each curve is `Bound.max_H(...).speedup`: the largest $H$ at which the
# higher-order terms of the rate stay below the leading one, i.e. the largest $H$ that
# keeps linear speed-up at the bound's recommended step. SGD does not depend on $H$ and
# appears as a flat line (the synchronous reference).

# %%
Hs = np.unique(np.round(np.logspace(0, np.log10(512), 40))).astype(int)
rows = []
fig, ax = plt.subplots(figsize=(7, 4.2))
for i, b in enumerate(BOUNDS):
    v = theory.at_optimal_step(b, **{**REF, "H": Hs}).value
    ax.loglog(Hs, v, color=f"C{i}", label=b.name)
    if "H" in b.parameters:
        hmax = float(b.max_H(**REF).speedup)
        if np.isfinite(hmax) and hmax <= Hs[-1]:
            vh = theory.at_optimal_step(b, **{**REF, "H": hmax}).value
            ax.plot(hmax, vh, "v", color=f"C{i}", ms=8)
    rows += [{"bound": b.name, "H": int(h), "optimal_value": x} for h, x in zip(Hs, v, strict=True)]
ax.set_xlabel("sync interval $H$")
ax.set_ylabel("bound at the optimal alpha")
ax.legend(fontsize=8)
ax.set_title("bound vs H (triangles: largest H keeping linear speed-up)")
plt.show()
write_csv(OUT / "sweep_H.csv", rows)

# %% [markdown]
# ## The bound versus the number of workers $K$
#
# Linear speed-up means that, for large $T$, the bound falls like $1/\sqrt{KT}$: the grey
# line has slope $-1/2$. Local methods keep this only while $H$ is small enough relative
# to $T$ and $K$ (see the rate terms below); at fixed $H$ and $T$ the drift terms take
# over once $K$ is large.

# %%
Ks = np.array([1, 2, 4, 8, 16, 32, 64, 128])
rows = []
fig, ax = plt.subplots(figsize=(7, 4.2))
for i, b in enumerate(BOUNDS):
    v = theory.at_optimal_step(b, **{**REF, "K": Ks}).value
    ax.loglog(Ks, v, "o-", color=f"C{i}", label=b.name, ms=3)
    rows += [{"bound": b.name, "K": int(k), "optimal_value": x} for k, x in zip(Ks, v, strict=True)]
v_sgd = theory.at_optimal_step("sgd", **{**REF, "K": 1}).value
ax.loglog(Ks, v_sgd / np.sqrt(Ks), color="grey", lw=3, alpha=0.3, label=r"$\propto K^{-1/2}$")
ax.set_xlabel("workers $K$")
ax.set_ylabel("bound at the optimal alpha")
ax.legend(fontsize=8)
ax.set_title(f"bound vs K (T = {REF['T']}, H = {REF['H']})")
plt.show()
write_csv(OUT / "sweep_K.csv", rows)

# %% [markdown]
# ## The bound versus the pull probability $p$ (and the pull rate $\eta$)
#
# Only bounds for PALSGD depend on $p$ and $\eta$. Each curve fixes $\eta$ and re-optimises
# $\alpha$ at every $p$; a gap in a curve means that no step size meets the conditions
# there. The dashed line is the bound of Local SGD ($p = 0$) from the same theorem
# family when one is registered, else the published Local SGD bound.
#
# These bounds count steps, not seconds: a pull step costs no forward/backward pass and
# the bound charges it like a gradient step. Whether PALSGD's cheaper steps make up for a
# weaker guarantee per step is a wall-clock question (notebook 04).

# %%
p_bounds = [b for b in BOUNDS if "p" in b.parameters]
ps = np.linspace(0.02, 0.9, 45)
rows = []
if not p_bounds:
    print("no registered bound depends on p")
for b in p_bounds:
    fig, ax = plt.subplots(figsize=(7, 4.2))
    for j, eta in enumerate([0.1, 0.5, 1.0, 2.0]):
        opt = theory.at_optimal_step(b, **{**REF, "p": ps, "eta": eta})
        ax.semilogy(ps, opt.value, color=f"C{j}", label=rf"$\eta = {eta}$")
        rows += [
            {"bound": b.name, "p": p, "eta": eta, "optimal_alpha": a, "optimal_value": x}
            for p, a, x in zip(ps, opt.alpha, opt.value, strict=True)
        ]
    ref_name = next(
        (n.name for n in BOUNDS if "local_sgd" in n.algorithms and n.derived_here and
         "p" not in n.parameters),
        "local_sgd_iid",
    )
    ax.axhline(theory.at_optimal_step(ref_name, **REF).value, color="k", ls="--", lw=1, label=f"{ref_name} (p = 0)")
    ax.set_xlabel("pull probability $p$")
    ax.set_ylabel("bound at the optimal alpha")
    ax.set_title(f"{b.name}: bound vs p")
    ax.legend(fontsize=8)
    plt.show()
if rows:
    write_csv(OUT / "sweep_p.csv", rows)
    ref_value = float(theory.at_optimal_step(ref_name, **REF).value)
    finite = [r["optimal_value"] for r in rows if np.isfinite(r["optimal_value"])]
    print(f"{ref_name} at p = 0: {ref_value:.4g}; p-dependent bounds over the sweep: "
          f"{min(finite):.4g} to {max(finite):.4g} "
          f"({'never below' if min(finite) >= ref_value else 'partly below'} the p = 0 value)")

# %% [markdown]
# ### Heterogeneity $\zeta$
#
# Bounds for non-i.i.d. data carry a $\zeta^2$ term that grows with $H$; bounds assuming
# i.i.d. data do not apply when $\zeta > 0$ (they are left out here).

# %%
zetas = np.logspace(-2, 1, 40)
zeta_bounds = [b for b in BOUNDS if "zeta" in b.parameters]
fig, ax = plt.subplots(figsize=(7, 4.2))
for i, b in enumerate(zeta_bounds):
    for H, ls in ((2, ":"), (8, "-"), (32, "--")):
        v = theory.at_optimal_step(b, **{**REF, "zeta": zetas, "H": H}).value
        ax.loglog(zetas, v, color=f"C{i}", ls=ls, label=f"{b.name}, H = {H}")
ax.set_xlabel(r"heterogeneity $\zeta$")
ax.set_ylabel("bound at the optimal alpha")
ax.legend(fontsize=7)
plt.show()

# %% [markdown]
# ## Rate terms
#
# `Bound.rate()` substitutes the bound's recommended step schedule $\alpha(T, K, \dots)$
# and groups the result by powers of $T$: the first group is the leading term, the rest
# are higher-order terms. Linear speed-up means a leading term $\propto 1/\sqrt{KT}$; the
# higher-order terms say how large $H$ may grow before they dominate.

# %%
for b in BOUNDS:
    if b.recommended_step is None:
        display(Markdown(f"**`{b.name}`**: no recommended step schedule"))
        continue
    terms = b.rate()
    display(Markdown(f"**`{b.name}`** with $\\alpha = {sp.latex(b.recommended_step)}$:"))
    labels = ["leading"] + ["higher order"] * (len(terms) - 1)
    tex = " + ".join(
        rf"\underbrace{{{sp.latex(r.expression)}}}_{{\text{{{lab}}}}}"
        for r, lab in zip(terms, labels, strict=True)
    )
    display(Math(r"\text{bound}\,\big|_{\alpha = \alpha_{\mathrm{rec}}} = " + tex))

# %% [markdown]
# `Bound.max_H` and `Bound.rounds_to_eps` turn the rate into numbers for the reference
# configuration: the largest $H$ with linear speed-up (`.speedup`), the largest $H$ at
# which the recommended step still meets the conditions (`.conditions`), which of the two
# binds (`.binding`, the step there is `.alpha`), and the number of communication rounds
# $R = T/H$ needed to guarantee a bound of $\varepsilon$ (at the optimal step). For a bound
# without $H$ there is no limit below `h_max`: `binding` is `"none"`.

# %%
EPS = 0.05
rows = []
for b in BOUNDS:
    mh = b.max_H(**REF)
    R = float(b.rounds_to_eps(EPS, **REF))
    rows.append(
        {
            "bound": b.name,
            "max H (speed-up)": fmt(mh.speedup, ".0f") if b.uses_H else "no H",
            "max H (conditions)": fmt(mh.conditions, ".0f") if b.uses_H else "no H",
            "binds": str(mh.binding),
            f"rounds to eps={EPS}": fmt(R, ".0f"),
            "steps T = R H": fmt(R * (REF["H"] if "H" in b.parameters else 1), ".0f"),
        }
    )
md_table(rows, list(rows[0]))
with open(OUT / "rates.json", "w") as fh:
    json.dump(
        {
            b.name: [{"coefficient": str(r.coefficient), "T_exponent": str(r.t_exponent)}
                     for r in b.rate()] if b.recommended_step is not None else None
            for b in BOUNDS
        }
        | {"max_H_and_rounds": rows},
        fh,
        indent=1,
    )

# %% [markdown]
# ## Interactive exploration
#
# With `ipywidgets` installed (`pip install ipywidgets`, or the project's `notebooks`
# extra) the cell below shows sliders for $\alpha$, $H$, $p$, $\eta$ and $K$. Without it,
# the same function is drawn once at the reference configuration; the sweeps above are the
# static version of the sliders.

# %%
def show_configuration(log10_alpha=-2.0, H=8, p=0.2, eta=0.5, K=4):
    """Each bound's value and its conditions at one configuration."""
    vals = {**REF, "alpha": 10.0**log10_alpha, "H": H, "p": p, "eta": eta, "K": K}
    names, values, colors = [], [], []
    for b in BOUNDS:
        names.append(b.name)
        values.append(float(b(**vals)))
        colors.append("tab:green" if bool(b.conditions_hold(**vals)) else "tab:red")
    fig, ax = plt.subplots(figsize=(7, 3))
    ax.scatter(values, names, c=colors, s=60, zorder=3)
    ax.set_xscale("log")
    ax.grid(True, which="both", axis="x", alpha=0.3)
    ax.set_xlabel("bound (green: conditions hold, red: they fail)")
    ax.set_title(rf"$\alpha$ = {vals['alpha']:.3g}, H = {H}, p = {p}, $\eta$ = {eta}, K = {K}")
    plt.show()


try:
    import ipywidgets as widgets
except ImportError:
    widgets = None

if widgets is not None:
    widgets.interact(
        show_configuration,
        log10_alpha=widgets.FloatSlider(value=-2.0, min=-4.0, max=0.0, step=0.05),
        H=widgets.IntSlider(value=8, min=1, max=256),
        p=widgets.FloatSlider(value=0.2, min=0.0, max=0.95, step=0.01),
        eta=widgets.FloatSlider(value=0.5, min=0.0, max=4.0, step=0.05),
        K=widgets.IntSlider(value=4, min=1, max=64),
    )
else:
    print("ipywidgets is not installed: showing the reference configuration only")
    show_configuration()

# %% [markdown]
# ## Typing in a bound of your own
#
# `Bound.from_strings` builds a bound from text in the project's symbols (`L, sigma, zeta,
# F0, beta, K, H, T, R, p, alpha, eta, gamma, mu, eps`), with its conditions and, if you
# have one, a recommended step schedule. As an example, here is Corollary 2 of Wang and
# Joshi (Cooperative SGD, JMLR 2021) typed in by hand. The toolkit already encodes it as
# `local_sgd_iid`, so we can check that the typed version agrees symbolically, and then run
# every check of this notebook on it. The same works for any theorem you have, e.g. the
# paper's own PALSGD bound.

# %%
mine = theory.Bound.from_strings(
    "my_local_sgd",
    "2*F0/(alpha*T) + alpha*L*sigma**2/K + alpha**2*L**2*sigma**2*(H - 1)",
    {"step": "alpha*L + alpha**2*L**2*H*(H - 1) <= 1"},
    recommended_step="sqrt(K/T)/L",
    algorithm="local_sgd",
    provenance="typed in from Wang & Joshi, JMLR 22(213) 2021, Corollary 2",
)
display(Math(mine.latex()))
encoded = get("local_sgd_iid")
same = sp.simplify(mine.expression - encoded.expression) == 0
same_cond = sp.simplify(mine.conditions[0].margin - encoded.conditions[0].margin) == 0
print("same expression as local_sgd_iid:", same, "| same condition:", same_cond)
assert same and same_cond

# %% [markdown]
# The same numerical checks: value and conditions at the reference configuration, the
# optimal step, the rate, the largest $H$, the rounds to reach $\varepsilon$, and the
# configuration check of notebook 02 (`theory.check.check` accepts `Bound` objects).

# %%
print("bound at reference:", fmt(mine(**REF)), "| conditions hold:",
      bool(mine.conditions_hold(**REF)))
print("optimal alpha:", fmt(mine.optimal_step(**REF)), "| largest alpha:",
      fmt(mine.max_step(**REF)))
print("rate:", " + ".join(str(r) for r in mine.rate()))
mh = mine.max_H(**REF)
print("max H:", fmt(mh.H, ".0f"), "| binds:", mh.binding, "| speed-up:", fmt(mh.speedup, ".0f"),
      "| conditions:", fmt(mh.conditions, ".0f"), "| step there:", fmt(mh.alpha))
print(f"rounds to eps = {EPS}:", fmt(mine.rounds_to_eps(EPS, **REF), ".0f"))
assert np.isclose(float(mine(**REF)), float(encoded(**REF)))
assert np.isclose(float(mine.optimal_step(**REF)), float(encoded.optimal_step(**REF)))
report = check({k: v for k, v in REF.items() if k not in ("p", "eta")}, bounds=[mine])
print()
print(report.to_text())

# %% [markdown]
# Mistakes are caught when the bound is built, with a message that names the problem:

# %%
for args in [
    ("typo", "2*F0/(alpha*T) + alhpa*L*sigma**2/K", ["alpha*L <= 1"]),
    ("not_a_condition", "2*F0/(alpha*T)", ["alpha*L + 1"]),
]:
    try:
        theory.Bound.from_strings(*args)
    except UserInputError as exc:
        print("UserInputError:", exc)

# %% [markdown]
# To verify a bound you typed in, pass it to `theory.verify_bound(mine)` (notebook 03
# shows it), or register it with `theory.bounds.register(mine)` so that
# `theory.check.check` and `palsgd verify` find it by name.
#
# Data written by this notebook:

# %%
for f in sorted(OUT.iterdir()):
    print(f.name, f.stat().st_size, "bytes")
