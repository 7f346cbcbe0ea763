"""`bench`'s rows for a GPU table: a model out of GPU memory at a length is a row marked OOM and the run goes on; the
first (compiling) pass is timed apart; a model that says which attention backend it ran has it in its row."""

import pytest
import torch

from hf_longdoc.experiments import bench
from hf_longdoc.experiments.report import format_table, write_bench_outputs

TINY = dict(hidden_size=16, num_layers=1, num_heads=2, repeats=1, warmup=1, window=32, num_global=2, device="cpu",
            progress=lambda line: None, roofline=False)


def test_a_model_out_of_gpu_memory_is_an_oom_row_and_the_run_goes_on(monkeypatch, tmp_path):
    measure = bench._measure

    def running_out_at_128_for_bert(model, name, input_ids, *args, **kwargs):
        if name == "bert" and input_ids.shape[1] == 128:
            raise torch.OutOfMemoryError("CUDA out of memory (simulated)")
        return measure(model, name, input_ids, *args, **kwargs)

    monkeypatch.setattr(bench, "_measure", running_out_at_128_for_bert)
    rows = bench.run_bench(models=("contextualizer", "bert"), lengths=(64, 128), **TINY)
    by_key = {(row["model"], row["length"]): row for row in rows}
    assert by_key[("bert", 128)]["oom"] and by_key[("bert", 128)]["seconds"] is None
    assert by_key[("bert", 64)]["seconds"] > 0 and by_key[("contextualizer", 128)]["seconds"] > 0  # it went on
    assert by_key[("contextualizer", 128)]["speedup_vs_bert"] is None  # no reference time at that length
    assert by_key[("contextualizer", 64)]["speedup_vs_bert"] > 0
    table = format_table(rows)
    assert any(line.split()[:4] == ["bert", "128", "OOM", "OOM"] for line in table.splitlines())
    csv_path, png_path = write_bench_outputs(rows, str(tmp_path / "bench"))
    assert "oom" in open(csv_path).readline()


def test_the_first_pass_is_timed_apart_and_the_backend_is_named():
    rows = bench.run_bench(models=("sparse_longformer",), lengths=(64,), **TINY)
    (row,) = rows
    assert row["first_seconds"] > 0 and row["compile_seconds"] == pytest.approx(
        max(0.0, row["first_seconds"] - row["seconds"]))
    assert row["backend"] == "blocked"  # `auto` on the CPU
    assert "compile s" in format_table(rows) and "blocked" in format_table(rows)


def test_the_flex_variant_runs_in_bench_and_says_so():
    (row,) = bench.run_bench(models=("sparse_longformer:flex",), lengths=(64,), **TINY)
    assert row["backend"] == "flex" and row["seconds"] > 0


def test_without_warmup_there_is_no_first_pass_time():
    (row,) = bench.run_bench(models=("contextualizer",), lengths=(64,), **{**TINY, "warmup": 0})
    assert row["first_seconds"] is None and row["compile_seconds"] is None
