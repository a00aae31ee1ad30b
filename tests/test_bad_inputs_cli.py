"""Bad input to every command: exit code 2, one clean line, no traceback, the option named.

Each case is ``(argv, needle)``: ``palsgd ARGV`` must return 2, print no traceback, and
name ``needle`` (the parameter or flag the user typed, or the bad value) on stderr. Paths
in braces are files the fixture makes: ``{bin}`` a binary file, ``{dup}`` / ``{dupjson}``
YAML / JSON with a key given twice, ``{list}`` a YAML list, ``{bad}`` malformed YAML,
``{file}`` an existing plain file, ``{dir}`` an existing directory, ``{missing}`` a path
that does not exist, ``{ro}`` a location where nothing can be created. Every case fails
before any work starts (no training, no timing), so the suite takes seconds.
"""

from __future__ import annotations

import pytest

from core import exitcodes
from palsgd.cli import main

CHECK = ["check", "--L", "1", "--sigma", "1", "--zeta", "0.5", "--F0", "1", "--T", "1000"]

CASES: list[tuple[str, str]] = [
    # ------------------------------------------------------------------ palsgd check
    # (a notation flag out of its range: argparse names the flag and its aliases)
    *[
        (" ".join(CHECK) + f" {flag} {val}", name)
        for flag, val, name in [
            ("--L", "-1", "argument --L: -1 is not in (0, inf)"),
            ("--L", "0", "argument --L: 0 is not in (0, inf)"),
            ("--L", "nan", "argument --L: nan is not in (0, inf)"),
            ("--L", "inf", "argument --L: inf is not in (0, inf)"),
            ("--L", "abc", "--L"),
            ("--sigma", "-1", "argument --sigma: -1 is not in [0, inf)"),
            ("--zeta", "-0.1", "argument --zeta: -0.1 is not in [0, inf)"),
            ("--F0", "-5", "argument --F0: -5 is not in [0, inf)"),
            ("--K", "0", "--K/--world_size/--num_gpus: 0 is not an integer in [1, inf)"),
            ("--K", "2.5", "--K/--world_size/--num_gpus: 2.5 is not an integer in [1, inf)"),
            ("--H", "0", "--H/--sync_interval: 0 is not an integer in [1, inf)"),
            ("--H", "1.5", "--H/--sync_interval: 1.5 is not an integer in [1, inf)"),
            ("--T", "0", "--T/--steps: 0 is not an integer in [1, inf)"),
            ("--T", "-3", "--T/--steps: -3 is not an integer in [1, inf)"),
            ("--T0", "-1", "--T0/--local_sgd_start_iter: -1 is not an integer in [0, inf)"),
            ("--p", "1", "--p/--prob_no_grad: 1 is not in [0, 1)"),
            ("--p", "-0.1", "--p/--prob_no_grad: -0.1 is not in [0, 1)"),
            ("--p", "1.5", "--p/--prob_no_grad: 1.5 is not in [0, 1)"),
            ("--lr", "0", "--alpha/--lr: 0 is not in (0, inf)"),
            ("--lr", "-1", "--alpha/--lr: -1 is not in (0, inf)"),
            ("--alpha", "nan", "--alpha/--lr: nan is not in (0, inf)"),
            ("--eta", "-1", "argument --eta: -1 is not in [0, inf)"),
            ("--gamma", "0", "--gamma/--outer_lr: 0 is not in (0, inf)"),
            ("--mu", "1", "--mu/--outer_momentum: 1 is not in [0, 1)"),
            ("--mu", "-0.5", "--mu/--outer_momentum: -0.5 is not in [0, 1)"),
            ("--A", "0", "--A/--grad_accu_step: 0 is not an integer in [1, inf)"),
            ("--eps", "0", "argument --eps: 0 is not in (0, inf)"),
            ("--eps", "-1", "argument --eps: -1 is not in (0, inf)"),
            ("--world_size", "0", "--K/--world_size/--num_gpus: 0 is not an integer in [1, inf)"),
            ("--prob_no_grad", "2", "--p/--prob_no_grad: 2 is not in [0, 1)"),
            ("--sync_interval", "0", "--H/--sync_interval: 0 is not an integer in [1, inf)"),
            ("--outer_lr", "-1", "--gamma/--outer_lr: -1 is not in (0, inf)"),
            ("--steps", "0", "--T/--steps: 0 is not an integer in [1, inf)"),
            ("--preset", "nope", "nope"),
            ("--bound", "nope", "nope"),
            ("--algorithm", "nope", "--algorithm"),
            ("--config", "{missing}", "{missing}"),
            ("--config", "{dir}", "{dir}"),
            ("--config", "{bin}", "not a text file"),
            ("--config", "{dup}", "appears twice"),
            ("--config", "{dupjson}", "appears twice"),
            ("--config", "{list}", "must hold a mapping"),
            ("--config", "{bad}", "malformed"),
            ("--config", "{unknownkey}", "bogus_key"),
            ("--config", "{nonnumeric}", "'L'"),
            ("--config", "{badp}", "'p'"),
            ("--config", "{bothbounds}", "'bound' or 'bounds'"),
            ("--frobnicate", "1", "--frobnicate"),
        ]
    ],
    ("check", "nothing checked"),  # nothing given: nothing can be checked
    ("check --preset gptneo-8m-readme --L 30 --sigma 0.7 --F0 5 --T 2000", "--zeta"),
    ("check --config {empty}", "nothing checked"),
    ("check --L 1 --sigma 1 --F0 1 --T 100 --K 4 --H 8 --bound local_sgd_noniid", "--zeta"),
    # ------------------------------------------------------------------ palsgd bounds
    ("bounds nope", "nope"),
    ("bounds --latex nope", "nope"),
    ("bounds --frobnicate", "--frobnicate"),
    # ------------------------------------------------------------------ palsgd cost
    ("cost", "ACTION"),
    ("cost nope", "nope"),
    ("cost predict --setting nope", "nope"),
    ("cost predict --profile nope", "nope"),
    ("cost predict --method nope", "nope"),
    ("cost predict --p 1.5", "--p/--prob_no_grad: 1.5 is not"),
    ("cost predict --prob_no_grad 1", "--p/--prob_no_grad: 1 is not"),
    ("cost predict --H 0", "--H/--sync_interval: 0 is not"),
    ("cost predict --sync_interval 0", "--H/--sync_interval: 0 is not"),
    ("cost predict --T0 -1", "--T0/--local_sgd_start_iter: -1 is not"),
    ("cost predict --steps 0", "0 is not"),
    ("cost predict --step-ratio 0", "step_ratio"),
    ("cost predict --step-ratio -1", "step_ratio"),
    ("cost predict --utilisation 0", "utilisation"),
    ("cost predict --utilisation 2", "utilisation"),
    ("cost predict --gpu nope", "nope"),
    ("cost predict --coins nope", "nope"),
    ("cost predict --H x", "--H"),
    ("cost predict --profiles-file {missing}", "{missing}"),
    ("cost predict --profiles-file {bin}", "not a text file"),
    ("cost predict --profiles-file {dup}", "appears twice"),
    ("cost predict --profiles-file {list}", "must hold a mapping"),
    ("cost predict --profiles-file {badprofile}", "myprof"),
    ("cost predict --output {dir}", "--output"),
    ("cost predict --output {file}/x.json", "--output"),
    ("cost predict --output {ro}/x.json", "--output"),
    ("cost check --delay-s -1", "delay"),
    ("cost check --delay-per-byte-s -1", "delay_per_byte"),
    ("cost check --steps-scale 0", "steps_scale"),
    ("cost check --output {dir}", "--output"),
    ("cost calibrate --world-size 0", "world_size"),
    ("cost calibrate --sizes 0", "sizes"),
    ("cost calibrate --repeats 0", "repeats"),
    ("cost calibrate --trials 0", "trials"),
    ("cost calibrate --algorithm nope", "nope"),
    ("cost calibrate --output {file}/y.json", "--output"),
    # ------------------------------------------------------------------ palsgd probe
    ("probe --steps 0", "'steps'"),
    ("probe --steps -2", "'steps'"),
    ("probe --nproc 0", "'nproc'"),
    ("probe --points 0", "'points'"),
    ("probe --samples 0", "samples"),
    ("probe --max-samples 0", "max_samples"),
    ("probe --hvp-samples 0", "hvp_samples"),
    ("probe --hvp-iters 0", "hvp_iters"),
    ("probe --hvp-tol 0", "hvp_tol"),
    ("probe --hvp-tol -1", "hvp_tol"),
    ("probe --confidence 1", "confidence"),
    ("probe --confidence 0", "confidence"),
    ("probe --confidence 1.5", "confidence"),
    ("probe --f-lower nan", "f_lower"),
    ("probe --seed -1", "seed"),
    ("probe --device nope", "nope"),
    ("probe --device cuda:7", "cuda"),
    ("probe --model nope", "nope"),
    ("probe --dataset nope", "nope"),
    ("probe --run {missing}", "{missing}"),
    ("probe --run {dir}", "config.json"),
    ("probe --run {dir} --model gptneo-tiny", "--model"),
    ("probe --out {file}", "--out"),
    ("probe --out {file}/sub", "--out"),
    ("probe --out {ro}/sub", "--out"),
    ("probe --train-preset nope", "nope"),
    ("probe --train-config {missing}", "{missing}"),
    ("probe --train-config {bin}", "not a text file"),
    ("probe --train-config {dup}", "appears twice"),
    ("probe --model resnet-tiny", "resnet-tiny"),
    ("probe --steps x", "--steps"),
    # ------------------------------------------------------------------ palsgd figures
    ("figures --scale nope", "nope"),
    ("figures --only nope", "nope"),
    ("figures --nproc 0", "--nproc"),
    ("figures --seed -1", "--seed"),
    ("figures --out {file} --only paper_scale", "--out"),
    ("figures --out {file}/sub --only paper_scale", "--out"),
    ("figures --out {ro}/sub --only paper_scale", "--out"),
    ("figures --runs-dir {missing}", "--runs-dir"),
    ("figures --data nonsense", "--data"),
    ("figures --verify-report {missing}", "--verify-report"),
    ("figures --profile nope", "nope"),
    ("figures --scale paper --only loss_vs_time", "paper"),
    # ------------------------------------------------------------------ palsgd train
    *[
        (f"train {args}", needle)
        for args, needle in [
            ("--nproc 0", "'nproc'"),
            ("--T 0", "'T'"),
            ("--steps 0", "--steps"),
            ("--lr 0", "'alpha'"),
            ("--lr -1", "--lr"),
            ("--alpha nan", "'alpha'"),
            ("--p 1", "'p'"),
            ("--prob_no_grad 1.5", "--prob_no_grad"),
            ("--H 0", "'H'"),
            ("--sync_interval 0", "--sync_interval"),
            ("--eta -1", "'eta'"),
            ("--gamma 0", "'gamma'"),
            ("--mu 1", "'mu'"),
            ("--T0 -1", "'T0'"),
            ("--A 0", "'A'"),
            ("--grad_accu_step 0", "--grad_accu_step"),
            ("--batch-size 0", "batch_size"),
            ("--bs_per_gpu 0", "--bs_per_gpu"),
            ("--seq-len 1", "seq_len"),
            ("--weight-decay -1", "weight_decay"),
            ("--momentum 1", "momentum"),
            ("--beta1 1", "beta1"),
            ("--beta2 -0.1", "beta2"),
            ("--clip-grad-norm -1", "clip_grad_norm"),
            ("--outer-steps-per-sync 0", "outer_steps_per_sync"),
            ("--sync-offset -1", "sync_offset"),
            ("--comm-delay-s -1", "comm_delay_s"),
            ("--eval-interval -1", "eval_interval"),
            ("--eval-batches 0", "eval_batches"),
            ("--checkpoint-interval -1", "checkpoint_interval"),
            ("--keep-checkpoints 0", "keep_checkpoints"),
            ("--max-steps-this-run 0", "max_steps_this_run"),
            ("--max-steps-this-run 5", "checkpoint_interval"),
            ("--seed -1", "seed"),
            ("--log-interval 0", "log_interval"),
            ("--max-restarts -1", "max_restarts"),
            ("--optimizer nope", "nope"),
            ("--device nope", "nope"),
            ("--device cuda:3", "cuda"),
            ("--model nope", "nope"),
            ("--dataset nope", "nope"),
            ("--algorithm nope", "--algorithm"),
            ("--outer nope", "nope"),
            ("--coins nope", "nope"),
            ("--buffers nope", "nope"),
            ("--preset nope", "--preset"),
            ("--config {missing}", "{missing}"),
            ("--config {bin}", "not a text file"),
            ("--config {dup}", "appears twice"),
            ("--config {unknownkey}", "'L'"),
            ("--config {list}", "must hold a mapping"),
            ("--data-path {missing}", "{missing}"),
            ("--output-dir {file}", "--output-dir"),
            ("--output-dir {file}/sub", "--output-dir"),
            ("--output-dir {ro}/sub", "--output-dir"),
            ("--checkpoint-dir {file}", "--checkpoint-dir"),
            ("--resume {missing}", "{missing}"),
            ("--algorithm diloco --p 0.2", "'p'"),
            ("--algorithm local_sgd --T0 4", "'T0'"),
            ("--lr 10", "'eta'"),
            ("--outer average --gamma 0.5", "gamma"),
            ("--outer nesterov --mu 0", "'mu'"),
            ("--model resnet-tiny", "resnet-tiny"),
            ("--tokenizer {missing}", "{missing}"),
            ("--T abc", "--T"),
            ("--nproc 2 --coins bogus", "coins"),
            ("--nproc 2 --model nope", "nope"),
            ("--nproc 2 --algorithm diloco --p 0.3", "'p'"),
            ("--nproc 2 --model resnet-tiny", "--model"),
            ("--nproc 2 --lr 10", "'eta'"),
            ("--nproc 2 --device cuda", "cuda"),
            ("--nproc 2 --outer nope", "nope"),
            ("--nproc 2 --dataset nope", "nope"),
            ("--nproc 2 --buffers nope", "buffers"),
            ("--nproc 2 --algorithm local_sgd --T0 3", "'T0'"),
            ("--nproc 2 --output-dir {file}", "--output-dir"),
        ]
    ],
    # ------------------------------------------------------------------ palsgd verify
    ("verify --replicas 0", "replicas"),
    ("verify --bounds nope", "nope"),
    ("verify --seed -1", "seed"),
    ("verify --d 0", "--d"),
    ("verify --level 2", "level"),
    ("verify --noise nope", "nope"),
    ("verify --problems nope", "nope"),
    ("verify --out {file}", "{file}"),
    # ------------------------------------------------------------------ issue 21
    # sizes that cannot fit this machine: refused before any work
    ("cost calibrate --world-size 100000", "--world-size"),
    ("cost calibrate --sizes 1000000000000", "--sizes"),
    ("cost check --delay-s 1e9", "--delay-s"),
    ("cost check --steps-scale 1e9", "--steps-scale"),
    ("cost check --delay-per-byte-s 1e3", "--delay-per-byte-s"),
    ("probe --steps 1000000000000", "--steps"),
    ("probe --nproc 1000", "--nproc"),
    ("train --T 1000000000000000000", "T (option T)"),
    ("train --nproc 1000 --device cpu", "nproc"),
    ("figures --nproc 1000", "--nproc"),
    # unbounded or endless inputs: refused before reading
    ("check --config /dev/zero", "/dev/zero"),
    ("check --config /dev/urandom", "/dev/urandom"),
    ("train --config /dev/zero", "/dev/zero"),
    ("verify --bound-file /dev/zero", "/dev/zero"),
    ("cost predict --profiles-file /dev/urandom", "/dev/urandom"),
    ("check --config {huge}", "MiB"),
    # formulas: nested powers, infinite or undefined constants, two bounds of one name
    ("verify --bound-file {nested}", "1e+300"),
    ("verify --bound-file {infbound}", "1e999"),
    ("verify --bound-file {nanbound}", "0/0"),
    ("verify --bound-file {deepbound}", "nested"),
    ("verify --bound-file {dupnames}", "given twice"),
    ("verify --bounds sgd --at L=1,L=2,T=6,alpha=1", "L is given twice"),
    ("verify --bounds sgd --at L=1,T=6,alpha=1,p=1.5", "p = 1.5"),
    ("verify --replicas 1", "--replicas"),
    # options that would write outside the outputs or over a previous run
    ("train --nproc 1 --run-name ../../escape", "run_name"),
    ("train --nproc 1 --output-dir {prevrun}", "--output-dir"),
    ("train --preset authors-defaults-gptneo", "palsgd check only"),
    ("cost predict --output /dev/full", "--output"),
    ("cost predict --output /dev/null", "--output"),
    # ------------------------------------------------------------------ the entry point
    ("", "subcommands"),
    ("frobnicate", "frobnicate"),
]


@pytest.fixture
def files(tmp_path, monkeypatch):
    """The files the cases name, in a fresh working directory."""
    monkeypatch.chdir(tmp_path)
    return make_files(tmp_path)


def make_files(tmp_path):
    """Write the files the cases name under ``tmp_path``; their paths by brace name."""
    (tmp_path / "bin.yaml").write_bytes(bytes(range(256)) * 4)
    (tmp_path / "dup.yaml").write_text("L: 1\nsigma: 1\nL: 2\n")
    (tmp_path / "dup.json").write_text('{"L": 1, "L": 2}')
    (tmp_path / "list.yaml").write_text("- 1\n- 2\n")
    (tmp_path / "bad.yaml").write_text("L: [1, 2\nsigma: :\n")
    (tmp_path / "unknown.yaml").write_text("L: 1\nbogus_key: 3\n")
    (tmp_path / "nonnumeric.yaml").write_text("L: abc\n")
    (tmp_path / "badp.yaml").write_text("L: 1\nsigma: 1\nF0: 1\nT: 10\np: 2\n")
    (tmp_path / "bothbounds.yaml").write_text("bound: sgd\nbounds: [sgd]\n")
    (tmp_path / "empty.yaml").write_text("")
    (tmp_path / "badprofile.yaml").write_text("myprof: {gpu: A100-SXM4-80GB}\n")
    (tmp_path / "plain.txt").write_text("not a directory\n")
    (tmp_path / "adir").mkdir()
    with open(tmp_path / "huge.yaml", "wb") as fh:  # sparse, over the 4 MiB input limit
        fh.truncate(5 * 2**20)
    bound = "name: b\nalgorithm: sgd\nconditions: ['alpha*L <= 1']\nexpression: '{}'\n"
    (tmp_path / "nested.yaml").write_text(bound.format("(((2**64)**64)**64)**64*F0/(alpha*T)"))
    (tmp_path / "inf.yaml").write_text(bound.format("1e999*F0/(alpha*T)"))
    (tmp_path / "nan.yaml").write_text(bound.format("0/0*F0/(alpha*T) + F0"))
    (tmp_path / "deep.yaml").write_text(bound.format("(" * 70 + "F0" + " + 1)" * 70))
    one = "  - name: twin\n    algorithm: sgd\n    expression: 2*F0/(alpha*T)\n"
    (tmp_path / "dupnames.yaml").write_text("bounds:\n" + one + one)
    (tmp_path / "prevrun").mkdir()
    (tmp_path / "prevrun" / "summary.json").write_text("{}")
    return {
        "huge": str(tmp_path / "huge.yaml"),
        "nested": str(tmp_path / "nested.yaml"),
        "infbound": str(tmp_path / "inf.yaml"),
        "nanbound": str(tmp_path / "nan.yaml"),
        "deepbound": str(tmp_path / "deep.yaml"),
        "dupnames": str(tmp_path / "dupnames.yaml"),
        "prevrun": str(tmp_path / "prevrun"),
        "bin": str(tmp_path / "bin.yaml"),
        "dup": str(tmp_path / "dup.yaml"),
        "dupjson": str(tmp_path / "dup.json"),
        "list": str(tmp_path / "list.yaml"),
        "bad": str(tmp_path / "bad.yaml"),
        "unknownkey": str(tmp_path / "unknown.yaml"),
        "nonnumeric": str(tmp_path / "nonnumeric.yaml"),
        "badp": str(tmp_path / "badp.yaml"),
        "bothbounds": str(tmp_path / "bothbounds.yaml"),
        "empty": str(tmp_path / "empty.yaml"),
        "badprofile": str(tmp_path / "badprofile.yaml"),
        "file": str(tmp_path / "plain.txt"),
        "dir": str(tmp_path / "adir"),
        "missing": str(tmp_path / "no_such_thing"),
        "ro": "/proc/palsgd_readonly",  # nothing can be created under /proc, even as root
    }


def test_enough_distinct_cases():
    assert len(CASES) >= 180
    assert len({c[0] for c in CASES}) == len(CASES), "duplicate cases"


@pytest.mark.parametrize("argv, needle", CASES, ids=[c[0] or "<none>" for c in CASES])
def test_bad_input_exits_2_cleanly(argv, needle, files, capsys):
    argv = argv.format(**files)
    needle = needle.format(**files)
    code = main(argv.split())
    err = capsys.readouterr().err
    assert code == exitcodes.BAD_INPUT, f"exit {code}: {err[-2000:]}"
    assert "Traceback" not in err, err[-2000:]
    assert needle in err, f"{needle!r} not named in: {err[-2000:]}"
    errors = [ln for ln in err.splitlines() if "error" in ln]
    assert len(errors) == (1 if argv else 0), f"not one line: {err[-2000:]}"  # bare: usage
