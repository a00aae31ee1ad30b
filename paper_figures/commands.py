"""The ``palsgd`` subcommands of the figure layer (dispatched by :mod:`palsgd.cli`)."""

#: name -> (implementing module, one-line help)
COMMANDS: dict[str, tuple[str, str]] = {
    "figures": ("paper_figures.cli", "regenerate the paper's figures"),
}
