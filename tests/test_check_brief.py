"""``palsgd check``'s default answer is brief (at most 25 lines, the full report behind
``--verbose``) and no line of either form is garbled: no ``H <= >= ...``, no ``<= none``, no
``n/a x``, no ``nan%``, no negative share, no numpy warning."""

from __future__ import annotations

import re

import pytest

from palsgd.cli import main

CONFIGS = {
    "readme": "--L 10 --sigma 1 --zeta 0.5 --F0 5 --K 4 --H 32 --p 0.2 --eta 1 --lr 0.001 "
    "--T 10000",
    "preset": "--preset gptneo-8m-readme --L 30 --sigma 0.7 --zeta 0.3 --F0 5 --T 2000",
    "local_sgd": "--L 10 --sigma 1 --zeta 0.5 --F0 5 --K 4 --H 32 --lr 0.001 --T 10000",
    "sgd": "--L 1 --sigma 1 --F0 1 --K 4 --T 1000",
    "no_alpha": "--L 2 --sigma 1 --zeta 0.1 --F0 3 --K 8 --H 16 --p 0.1 --eta 0.5 --T 100000",
    "fails": "--L 10 --sigma 1 --zeta 0.5 --F0 5 --K 4 --H 32 --p 0.2 --eta 1 --lr 0.5 --T 10000",
    "overflow": "--F0 1e308 --T 1 --L 1 --sigma 1 --K 2",
    "huge_L": "--L 1e160 --lr 1e-170 --sigma 1 --zeta 0.5 --F0 1 --K 4 --H 8 --T 1000",
}

GARBLED = [
    re.compile(r"<= >="),
    re.compile(r"<= none"),
    re.compile(r"n/a x"),
    re.compile(r"nan%"),
    re.compile(r"\s-\d+(\.\d+)?%"),  # a negative share
    re.compile(r"Warning"),
    re.compile(r"Traceback"),
]


def _run(argv: list[str], capsys) -> tuple[int, str, str]:
    code = main(["check", *argv])
    cap = capsys.readouterr()
    return code, cap.out, cap.err


@pytest.mark.parametrize("name", sorted(CONFIGS))
def test_brief_answer_is_short_and_clean(name, capsys):
    code, out, err = _run(CONFIGS[name].split(), capsys)
    assert code == 0, err
    lines = out.splitlines()
    assert lines[0].startswith("verdict: ")
    assert len(lines) <= 25, out
    assert "--verbose" in lines[-1]
    for pat in GARBLED:
        assert not pat.search(out + err), (pat.pattern, out, err)


@pytest.mark.parametrize("name", sorted(CONFIGS))
def test_verbose_report_is_full_and_clean(name, capsys):
    code, out, err = _run([*CONFIGS[name].split(), "--verbose"], capsys)
    assert code == 0, err
    assert "conditions:" in out and "source:" in out
    for pat in GARBLED:
        assert not pat.search(out + err), (pat.pattern, out, err)


def test_brief_names_every_bound_and_the_dominant_term(capsys):
    _, out, _ = _run(CONFIGS["readme"].split(), capsys)
    for name in ("palsgd", "palsgd_outer", "palsgd_pull_aware", "palsgd_shared_coins"):
        assert re.search(rf"^{name}\s", out, re.M), name
    assert "F0 91%" in out  # 4 F0/(alpha T) is 90.6% of the bound
    _, full, _ = _run([*CONFIGS["readme"].split(), "--verbose"], capsys)
    assert "4*F0/(T*alpha)" in full and "4*F0/(T*alpha)" not in out


def test_a_bound_beyond_double_precision_is_said_to_say_nothing(capsys):
    _, out, _ = _run(CONFIGS["overflow"].split(), capsys)
    assert "sgd: the bound is not finite at these values" in out


def test_outside_the_conditions_negative_terms_get_no_share(capsys):
    # palsgd_pull_aware at eta < L: its drift horizon 1/(alpha (eta - L)) is negative
    _, out, _ = _run([*CONFIGS["readme"].split(), "--verbose"], capsys)
    block = out.split("== palsgd_pull_aware")[1].split("==")[0]
    assert "-0.1145" in block and "shares not shown" in block
