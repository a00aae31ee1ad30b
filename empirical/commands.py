"""The ``palsgd`` subcommands the empirical layer owns (dispatched by :mod:`palsgd.cli`)."""

#: name -> (implementing module, one-line help)
COMMANDS: dict[str, tuple[str, str]] = {
    "train": (
        "empirical.train",
        "distributed training: DDP, Local SGD, Post-Local SGD, DiLoCo, PALSGD",
    ),
    "probe": (
        "empirical.probe",
        "estimate L, sigma^2, zeta^2, F0 on a real model and check the run",
    ),
    "map": (
        "empirical.map_cli",
        "when pulling pays: every method tuned alike, the truth from the dynamics",
    ),
    "cost": (
        "empirical.cost.cli",
        "cost model: calibrate links, predict wall-clock and gains over DDP",
    ),
}
