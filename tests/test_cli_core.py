import subprocess
import sys

from palsgd.cli import main


def test_no_subcommand_prints_usage(capsys):
    assert main([]) == 2
    assert "subcommands" in capsys.readouterr().err


def test_unknown_subcommand_exit_2(capsys):
    assert main(["frobnicate"]) == 2
    assert "unknown subcommand" in capsys.readouterr().err


def test_console_script_help_runs():
    out = subprocess.run([sys.executable, "-m", "palsgd", "--help"], capture_output=True, text=True)
    assert out.returncode == 0 and "verify" in out.stdout


def test_readme_exit_code_table_is_the_module_table():
    """The README's table lists exactly the codes of core.exitcodes, in order."""
    import re
    from pathlib import Path

    from core import exitcodes

    text = (Path(__file__).resolve().parents[1] / "README.md").read_text()
    section = text.split("## Exit codes", 1)[1].split("\n## ", 1)[0]
    codes = [int(m) for m in re.findall(r"^\| (\d+) \|", section, re.M)]
    assert codes == list(exitcodes.TABLE)
    assert len(set(codes)) == len(codes)
    assert exitcodes.describe(2) == "2 (bad input)" and exitcodes.describe(99) == "99"


def test_guarded_maps_each_failure_to_its_code(capsys):
    import errno

    from core import exitcodes
    from core.errors import UserInputError
    from core.guard import guarded

    def raising(exc):
        def f():
            raise exc

        return f

    cases = [
        (UserInputError("bad 'x'"), exitcodes.BAD_INPUT),
        (KeyboardInterrupt(), exitcodes.INTERRUPTED),
        (MemoryError(), exitcodes.OUT_OF_RESOURCES),
        (OSError(errno.ENOSPC, "No space left on device", "f.json"), exitcodes.OUT_OF_RESOURCES),
        (OSError(errno.EROFS, "Read-only file system", "f.json"), exitcodes.BAD_INPUT),
        (ValueError("a bug"), exitcodes.INTERNAL_ERROR),
        (OSError(errno.EIO, "I/O error"), exitcodes.INTERNAL_ERROR),
    ]
    for exc, code in cases:
        assert guarded("palsgd x", raising(exc)) == code
        err = capsys.readouterr().err
        assert ("Traceback" in err) == (code == exitcodes.INTERNAL_ERROR), (exc, err)
    assert guarded("palsgd x", lambda: 3) == 3
    assert guarded("palsgd x", lambda: None) == 0
