"""What measures and compares models.

Timers and memory (`measure`), Transformers baselines (`baselines`), the speed benchmark (`bench`), per-family
micro-benchmarks (`profiling`), the trained comparison (`compare`) and their outputs (`report`).
"""
