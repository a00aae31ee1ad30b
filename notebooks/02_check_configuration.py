# ---
# jupyter:
#   jupytext:
#     formats: ipynb,py:percent
#     text_representation:
#       extension: .py
#       format_name: percent
#       format_version: '1.3'
#   kernelspec:
#     display_name: Python 3 (ipykernel)
#     language: python
#     name: python3
# ---

# %% [markdown]
# # 02 · Checking a configuration against the theory
#
# Before a long run it is worth asking what the theory says about its hyperparameters:
# do the step-size conditions of the encoded bounds hold, with what margin, which term of
# the bound dominates, which learning rate the bound recommends, and how large the sync
# interval may be before the speed-up from more workers is lost. `theory.check.check`
# (and `palsgd check` on the command line) answers these questions for one configuration.
#
# Notation (the PALSGD authors'): $K$ workers, $H$ local steps between syncs (pull steps
# count; code `sync_interval`), $p$ pull probability (`prob_no_grad`), $\alpha$ inner
# learning rate (`lr`), $\eta$ pull rate, $\gamma,\mu$ outer learning rate and momentum
# (`outer_lr`), $T_0$ DDP warm-up steps (`local_sgd_start_iter`), $T$ steps of the local
# phase. Problem constants: $L$ smoothness, $\sigma^2$ gradient-noise variance, $\zeta^2$
# heterogeneity, $F_0 = f(x_0) - f_\star$. A PALSGD pull step moves a worker towards the
# anchor $z$ by the *pull coefficient* $\alpha\eta/p$:
# $x \leftarrow x - (\alpha\eta/p)(x - z)$; a gradient step uses the rate $\alpha/(1-p)$.
#
# A condition `small <= big` is reported with its *margin* `big - small`: it holds when the
# margin is $\ge 0$. The problem constants must come from you (for a real model,
# `palsgd probe` estimates them; notebook 05). Files go to a temporary directory.

# %%
# %matplotlib inline
import json
import subprocess
import sys

import matplotlib.pyplot as plt
import numpy as np

from theory.check import check
from theory.nbtools import fmt, md_table, output_dir
from theory.presets import PRESETS
from core.errors import UserInputError

OUT = output_dir("02_check_configuration")
print("data files go to", OUT)


def summary(report):
    """One row per evaluated bound: value, conditions, recommended alpha, max H."""
    rows = []
    for b in report.bounds:
        if b.status != "evaluated":
            rows.append({"bound": b.name, "status": f"skipped: {b.reason}"})
            continue
        rows.append(
            {
                "bound": b.name,
                "status": "conditions hold" if b.conditions_hold else "conditions FAIL",
                "alpha": f"{fmt(b.alpha)} ({b.alpha_source})",
                "bound value": fmt(b.value),
                "dominant term": f"`{b.dominant_term}`",
                "recommended alpha": fmt(b.optimal_alpha),
                "max alpha": fmt(b.max_alpha),
                "max H (speed-up)": fmt(b.max_H_speedup, ".0f") if b.uses_H else "no H",
                "max H (conditions)": fmt(b.max_H_conditions, ".0f") if b.uses_H else "no H",
            }
        )
    cols = ["bound", "status", "alpha", "bound value", "dominant term", "recommended alpha",
            "max alpha", "max H (speed-up)", "max H (conditions)"]
    md_table(rows, cols)


def conditions(report):
    """Every condition of every evaluated bound with its margin."""
    rows = [
        {"bound": b.name, "condition": c.name, "relation": f"`{c.relation}`",
         "holds": "yes" if c.holds else "**NO**", "margin": fmt(c.margin, ".4g")}
        for b in report.bounds
        for c in b.conditions
    ]
    if rows:
        md_table(rows, ["bound", "condition", "relation", "holds", "margin"])
    else:
        print("no evaluated bound has conditions at this configuration")


def warnings_of(report):
    for w in report.warnings:
        margin = "" if w.margin is None else f" (margin {fmt(w.margin, '.3g')})"
        print(f"[{w.level}] {w.code}: {w.message}{margin}")


# %% [markdown]
# ## A configuration of your own
#
# Eight workers, Local SGD with $H = 16$, plain SGD inside and plain averaging outside,
# on a problem with $L = 2$, $\sigma = 1$, mildly heterogeneous data ($\zeta = 0.3$),
# $F_0 = 5$, and $T = 20{,}000$ local steps. `eps` asks for the number of communication
# rounds that guarantee a bound of $\varepsilon$.

# %%
MINE = dict(L=2.0, sigma=1.0, zeta=0.3, F0=5.0, K=8, H=16, T=20_000, alpha=0.01, eps=0.05)
rep = check(MINE)
print(rep.to_text())

# %% [markdown]
# The checker inferred the algorithm from $p$ and $H$ (here Local SGD: no $p$, $H > 1$) and
# evaluated every bound that covers it. The i.i.d. bound is *skipped*, with the reason,
# because $\zeta > 0$. The same report as tables, and each term's share of the bound:

# %%
summary(rep)
conditions(rep)
evaluated = [b for b in rep.bounds if b.status == "evaluated"]
fig, axes = plt.subplots(len(evaluated), 1, figsize=(7, 2.4 * len(evaluated)), squeeze=False)
for ax, b in zip(axes[:, 0], evaluated, strict=True):
    ax.barh([t.term for t in b.terms], [t.share for t in b.terms])
    ax.set_xlabel("share of the bound (%)")
    ax.set_title(f"{b.name}: which term dominates")
plt.tight_layout()
plt.show()
_ = (OUT / "my_config.json").write_text(json.dumps(rep.to_dict(), indent=1))

# %% [markdown]
# How to read it: a negative margin means the bound does not apply at this configuration
# (it may still be a good configuration; the theory just says nothing about it). The
# recommended step minimises the bound under its conditions, and the two "max H" numbers
# say how far the sync interval can grow at the bound's own step schedule: before the
# higher-order (drift) terms exceed the leading term, and before a condition fails. In
# the heterogeneous bound the drift term $6\alpha^2L^2H(H-1)\zeta^2$ grows quadratically
# in $H$. For this configuration:

# %%
for b in evaluated:
    failed = [c.name for c in b.conditions if not c.holds]
    verdict = f"condition(s) {failed} fail" if failed else "every condition holds"
    print(f"{b.name}: at alpha = {fmt(b.alpha)} {verdict}; the recommended alpha is "
          f"{fmt(b.optimal_alpha)} (largest feasible {fmt(b.max_alpha)}); H = {fmt(MINE['H'], '.0f')} "
          f"is {'within' if MINE['H'] <= b.max_H_speedup else 'beyond'} the linear-speed-up limit "
          f"{fmt(b.max_H_speedup, '.0f')} and {'within' if MINE['H'] <= b.max_H_conditions else 'beyond'}"
          f" the conditions' limit {fmt(b.max_H_conditions, '.0f')}")

# %% [markdown]
# Re-checking at the recommended step (leaving $\alpha$ out makes the checker use it):

# %%
rep_opt = check({k: v for k, v in MINE.items() if k != "alpha"})
summary(rep_opt)

# %% [markdown]
# ### The authors' flag names work too
#
# `lr`, `prob_no_grad`, `sync_interval`, `outer_lr`, `local_sgd_start_iter`,
# `grad_accu_step` are accepted everywhere as aliases; the report is identical.

# %%
ALIASED = {"L": 2.0, "sigma": 1.0, "zeta": 0.3, "F0": 5.0, "world_size": 8,
           "sync_interval": 16, "steps": 20_000, "lr": 0.01, "eps": 0.05}
assert check(ALIASED).to_dict() == rep.to_dict()
print("identical reports")

# %% [markdown]
# ## The paper's configurations (presets)
#
# The presets hold the hyperparameters of the authors' runs and of the DiLoCo reference
# setting, with their source. They hold no problem constants: $L$, $\sigma$, $\zeta$,
# $F_0$ and $T$ are yours.

# %%
md_table(
    [
        {
            "preset": f"`{p.name}`",
            "title": p.title,
            "values": ", ".join(f"{k}={v:g}" for k, v in p.values.items()),
            "inner / outer": f"{p.inner_optimizer} / {p.outer_optimizer}",
        }
        for p in PRESETS.values()
    ],
    ["preset", "title", "values", "inner / outer"],
)

# %% [markdown]
# ### GPT-Neo-8M, the authors' README run
#
# Four workers, $H = 32$, $T_0 = 32$, $p = 0.2$, $\eta = 1$, AdamW with $\alpha = 0.01$, outer
# Nesterov ($\gamma = 0.1$, $\mu = 0.9$). The constants below are *example values*, to be
# replaced by estimates for your model: $F_0 = \ln 50257 \approx 10.8$ is the cross entropy of
# a uniform next-token guess over GPT-Neo's vocabulary (the loss at initialisation is close
# to it, and $f_\star \ge 0$), while $L = 20$ and $\sigma = 2$ stand for the values
# `palsgd probe` would measure. The data are shuffled i.i.d. across workers ($\zeta = 0$).

# %%
USER_CONSTANTS = dict(L=20.0, sigma=2.0, zeta=0.0, F0=float(np.log(50257)), T=10_000)
rep_neo = check(USER_CONSTANTS, preset="gptneo-8m-readme")
print(rep_neo.to_text())
_ = (OUT / "gptneo_8m_readme.json").write_text(json.dumps(rep_neo.to_dict(), indent=1))

# %% [markdown]
# The warnings say why the numbers are an indication only: the run uses AdamW inside and
# Nesterov outside, while the encoded bounds assume plain SGD and plain averaging. The
# configuration-level stability checks still apply to the PALSGD step itself: the pull
# coefficient $\alpha\eta/p$ and the gradient branch $\alpha L/(1-p)$.
#
# The same schedule *without* pull steps ($p = 0$) is Local SGD; asking the checker for it
# shows what the Local SGD bounds say about $H = 32$ at these constants:

# %%
rep_neo0 = check({**USER_CONSTANTS, "p": 0.0}, preset="gptneo-8m-readme")
summary(rep_neo0)
conditions(rep_neo0)

# %% [markdown]
# ### DiLoCo reference setting
#
# $K = 8$, $H = 500$, outer Nesterov $\gamma = 0.7$, $\mu = 0.9$; the inner learning rate is
# not part of the preset, so we give one.

# %%
rep_diloco = check({**USER_CONSTANTS, "alpha": 1e-3, "T": 100_000}, preset="diloco")
warnings_of(rep_diloco)
summary(rep_diloco)
conditions(rep_diloco)

# %% [markdown]
# At $H = 500$ the question is whether the published Local SGD theory covers such long
# rounds at all: how small the step must be for the drift conditions, and how large $H$
# may be at the bounds' own step schedule. Outer Nesterov is outside every encoded bound,
# as the warning says.

# %%
for b in rep_diloco.bounds:
    if b.status == "evaluated":
        print(f"{b.name}: largest alpha meeting the conditions at H = 500: {fmt(b.max_alpha)} "
              f"(given {fmt(b.alpha)}); at the recommended step the conditions allow "
              f"H <= {fmt(b.max_H_conditions, '.0f')} and linear speed-up H <= "
              f"{fmt(b.max_H_speedup, '.0f')}")

# %% [markdown]
# ## What changes when $p$ or $\eta$ changes
#
# Two quantities decide whether a PALSGD step is stable at all (theory plan, identity I3):
#
# * the **pull coefficient** $c = \alpha\eta/p$: a pull maps $x - z \mapsto (1 - c)(x - z)$,
#   so $c \le 1$ moves part of the way to the anchor, $1 < c \le 2$ overshoots it and
#   oscillates, $c > 2$ makes repeated pulls diverge;
# * the **gradient branch** $\alpha L/(1-p)$: a gradient step of size $\alpha/(1-p)$ diverges
#   along the sharpest direction of an $L$-smooth quadratic when it exceeds 2.
#
# Repeated pulls from $x_0 - z = 1$, for four pull coefficients:

# %%
fig, ax = plt.subplots(figsize=(7, 3.2))
n = np.arange(12)
for c in (0.5, 1.0, 1.5, 2.2):
    ax.plot(n, (1 - c) ** n, "o-", ms=3, label=f"c = {c}")
ax.axhline(0, color="k", lw=0.6)
ax.set_ylim(-4, 4)
ax.set_xlabel("consecutive pull steps")
ax.set_ylabel("$x - z$")
ax.legend(fontsize=8)
ax.set_title(r"pull steps $x - z \mapsto (1 - \alpha\eta/p)(x - z)$")
plt.show()

# %% [markdown]
# The checker reports both quantities as warnings with margins. A grid over $p$ and
# $\eta$ at fixed $\alpha = 0.02$, $H = 4$ and $L = 2$ (every other value from the
# configuration above), with the bound(s) that cover each configuration:

# %%
BASE = {k: v for k, v in MINE.items() if k not in ("eps",)} | {"alpha": 0.02, "H": 4}
rows = []
for p in (0.0, 0.05, 0.1, 0.2, 0.4, 0.6):
    for eta in (0.0, 0.5, 2.0, 8.0):
        r = check({**BASE, "p": p, "eta": eta})
        codes = {w.code: w for w in r.warnings}
        evaluated = [b for b in r.bounds if b.status == "evaluated"]
        rows.append(
            {
                "p": p,
                "eta": eta,
                "algorithm": r.algorithm,
                "alpha*eta/p": fmt(BASE["alpha"] * eta / p) if p > 0 else "no pulls",
                "alpha*L/(1-p)": fmt(BASE["alpha"] * BASE["L"] / (1 - p)),
                "stability": ", ".join(
                    c for c in ("pull_unstable", "pull_overshoot", "gradient_step_unstable",
                                "pull_noop", "eta_unused") if c in codes
                ) or "ok",
                "bound values (conditions)": "; ".join(
                    f"{b.name}: {fmt(b.value)} ("
                    + ("hold" if b.conditions_hold else
                       "fail: " + ",".join(c.name for c in b.conditions if not c.holds))
                    + ")"
                    for b in evaluated
                ) or "no bound registered",
            }
        )
md_table(rows, list(rows[0]))
_ = (OUT / "p_eta_grid.json").write_text(json.dumps(rows, indent=1))

# %% [markdown]
# The same stability regions as a map over $(p, \eta)$ for three learning rates. Lines:
# pull coefficient $\alpha\eta/p = 1$ (overshoot starts) and $= 2$ (divergence); in the
# hatched band on the right the gradient branch $\alpha L/(1-p)$ exceeds 2.

# %%
P, E = np.meshgrid(np.linspace(0.01, 0.99, 300), np.linspace(0.0, 8.0, 300))
fig, axes = plt.subplots(1, 3, figsize=(12, 3.6), sharey=True)
for ax, alpha in zip(axes, (0.05, 0.2, 0.6), strict=True):
    c = alpha * E / P
    region = np.where(c <= 1, 0, np.where(c <= 2, 1, 2))
    ax.contourf(P, E, region, levels=[-0.5, 0.5, 1.5, 2.5],
                colors=["#d9f0d3", "#fee08b", "#f4a582"])
    ax.contour(P, E, c, levels=[1, 2], colors="k", linewidths=0.8)
    p_grad = 1 - alpha * BASE["L"] / 2
    if 0 < p_grad < 1:
        ax.axvspan(p_grad, 1, hatch="//", fill=False, edgecolor="k", lw=0)
    ax.set_xlim(0, 1)
    ax.set_title(rf"$\alpha$ = {alpha}, L = {BASE['L']}")
    ax.set_xlabel("pull probability $p$")
axes[0].set_ylabel(r"pull rate $\eta$")
fig.suptitle("green: c <= 1, yellow: overshoot (1 < c <= 2), red: unstable (c > 2)", y=1.02)
plt.show()

# %% [markdown]
# Larger $\eta$ and smaller $p$ both raise the pull coefficient; a larger $\alpha$ shrinks the
# stable region from both sides (pulls and the $1/(1-p)$-scaled gradient steps). The
# bound columns of the grid show how each bound's value and conditions move with $p$ and
# $\eta$ (a failing condition is named; its statement is in notebook 01). The bounds'
# step-size conditions are stricter than bare stability: a configuration can be stable
# and still outside every guarantee. `palsgd check --bound NAME` selects one bound.

# %% [markdown]
# ## Bad input
#
# Every parameter is validated in one place; the message names the parameter (and its
# alias in the authors' code), the value and the allowed range.

# %%
for bad in ({**MINE, "p": 1.0}, {**MINE, "lr": -0.1, "alpha": None}, {**MINE, "H": 2.5}):
    bad = {k: v for k, v in bad.items() if v is not None}
    try:
        check(bad)
    except UserInputError as exc:
        print("UserInputError:", exc)

# %% [markdown]
# ## The same check on the command line
#
# `palsgd check` prints the text report (or JSON with `--json`) and exits with status 2 and
# one line on bad input. Its JSON equals the API's report:

# %%
cmd = [sys.executable, "-m", "palsgd", "check", "--preset", "gptneo-8m-readme",
       "--L", "20", "--sigma", "2", "--zeta", "0", "--F0", str(USER_CONSTANTS["F0"]),
       "--T", "10000", "--json"]
print("$ palsgd " + " ".join(cmd[3:]))
res = subprocess.run(cmd, capture_output=True, text=True, check=True)
cli_report = json.loads(res.stdout)
assert cli_report == json.loads(json.dumps(rep_neo.to_dict())), "CLI and API disagree"
print("CLI JSON == API report; bounds:", [b["name"] for b in cli_report["bounds"]])
bad = subprocess.run(cmd[:4] + ["--prob_no_grad", "1.5"], capture_output=True, text=True)
print("exit status", bad.returncode, "|", bad.stderr.strip())

# %%
for f in sorted(OUT.iterdir()):
    print(f.name, f.stat().st_size, "bytes")
