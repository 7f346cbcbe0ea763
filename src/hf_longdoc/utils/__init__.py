"""Small shared pieces with no model in them: validation rules, parsing, threads, processes, plotting and the
catalog of names. Nothing here imports anything of ours outside `utils`."""
