"""The ``palsgd`` subcommands the theory layer owns (dispatched by :mod:`palsgd.cli`)."""

#: name -> (implementing module, one-line help)
COMMANDS: dict[str, tuple[str, str]] = {
    "check": ("theory.check", "check a configuration against every applicable bound"),
    "bounds": (
        "theory.check_bounds_cmd",
        "list the encoded bounds and lower bounds (assumptions, conditions, LaTeX)",
    ),
    "verify": ("theory.verify.cli", "verify every bound: exact oracle, search, controls"),
    "worst-case": (
        "theory.worstcase.cli",
        "the worst case of a method over the whole class (PEP), and a bound against it",
    ),
}

#: subcommands that do no linear algebra (one BLAS thread is enough for them)
NO_BLAS = ("check", "bounds")
