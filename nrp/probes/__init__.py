"""Probes: controlled perturbations of answers (``perturbations``) and how each evaluator moves
under them (``probe``). ``nrp probe`` is the command line over them."""
