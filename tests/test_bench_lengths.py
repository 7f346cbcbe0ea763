"""`bench` at a length that is not whole materials of an elementwise model: rounded down and said, not a crash."""

from hf_longdoc.experiments.bench import run_bench


def test_an_elementwise_length_is_rounded_to_whole_materials_and_said():
    said = []
    rows = run_bench(models=("elementwise", "bert"), lengths=(100,), hidden_size=96, num_layers=1, num_heads=12,
                     repeats=1, warmup=0, progress=said.append, roofline=False)
    elementwise = next(row for row in rows if row["model"] == "elementwise")
    assert elementwise["length"] == 100 and elementwise["ids"] == 96  # 8 materials of 12
    assert any("not whole materials of 12; timing 96 ids" in line for line in said)
    assert elementwise["speedup_vs_bert"] is not None  # compared at the length asked for
