"""Training a family: the settings (`settings`), the recipe every training follows (`recipe`), the run (`run`),
the head stage (`head_fitting`) and `evaluate` (`evaluation`)."""
