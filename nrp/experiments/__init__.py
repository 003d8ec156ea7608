"""Experiment files (``nrp run``): one YAML file declares a whole run; every step is cached."""

from nrp.experiments.run import run_experiment
from nrp.experiments.schema import Experiment, load_experiment

__all__ = ["Experiment", "load_experiment", "run_experiment"]
