import subprocess
import sys

from theory.cli import main


def test_no_subcommand_prints_usage(capsys):
    assert main([]) == 2
    assert "subcommands" in capsys.readouterr().err


def test_unknown_subcommand_exit_2(capsys):
    assert main(["frobnicate"]) == 2
    assert "unknown subcommand" in capsys.readouterr().err


def test_console_script_help_runs():
    out = subprocess.run(
        [sys.executable, "-m", "theory.cli", "--help"], capture_output=True, text=True
    )
    assert out.returncode == 0 and "verify" in out.stdout
