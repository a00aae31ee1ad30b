"""The base layer, under both :mod:`theory` and :mod:`empirical`: what every command shares
and nothing PALSGD-specific. It imports no other package of the toolkit.

Files: ``errors.py`` (:class:`~core.errors.UserInputError`, the one error of bad input),
``exitcodes.py`` (the exit codes of every command) and ``guard.py`` (the one wrapper that
maps a command's failures to them), ``validation.py`` (the value checks and their one
message format: :class:`~core.validation.ParameterError`, :class:`~core.validation.ParamSpec`,
``check_spec``, ``check_int``, ``check_number``, ``check_fraction``, ``check_choice``,
``check_type``, ``with_flag``), ``files.py`` (bounded input files, output paths, memory),
``io.py`` (JSON cleaning, CSV and atomic writers, package versions) and ``limits.py``
(caps on processes, steps and planned durations). The table of the notation's parameters
(``L``, ``alpha``, ``p``, ...) is :mod:`theory.validation`'s.
"""
