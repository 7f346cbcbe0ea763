"""`bench` at a length that is not whole materials of an elementwise model: rounded down and said, not a crash."""

import json
import subprocess
import sys
import textwrap

import pytest

from hf_longdoc.experiments.bench import run_bench


def test_an_elementwise_length_is_rounded_to_whole_materials_and_said():
    said = []
    rows = run_bench(models=("elementwise", "bert"), lengths=(100,), hidden_size=96, num_layers=1, num_heads=12,
                     repeats=1, warmup=0, progress=said.append, roofline=False)
    elementwise = next(row for row in rows if row["model"] == "elementwise")
    assert elementwise["length"] == 100 and elementwise["ids"] == 96  # 8 materials of 12
    assert any("not whole materials of 12; timing 96 ids" in line for line in said)
    assert elementwise["speedup_vs_bert"] is not None  # compared at the length asked for


@pytest.mark.slow
def test_the_first_model_s_peak_memory_is_not_the_process_s_first_allocations():
    """In a fresh process, the first model's peak is measured after an unmeasured eager warm-up pass: the same model
    measured first and then again reads about the same peak (without the warm-up, on 2 CPU cores, 13.6 MiB first and
    3.7 MiB later: the thread pools' and the math library's one-off allocations)."""
    code = textwrap.dedent("""
        import json
        from hf_longdoc.experiments.bench import run_bench
        settings = dict(models=("contextualizer",), lengths=(1024,), hidden_size=64, num_layers=2, num_heads=2,
                        roofline=False, progress=lambda line: None)
        print(json.dumps([run_bench(**settings)[0]["peak_mib"] for _ in range(2)]))
    """)
    child = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300)
    assert child.returncode == 0, child.stderr[-2000:]
    first, again = json.loads(child.stdout.strip().splitlines()[-1])
    assert first <= again + 4, (first, again)


def test_float16_on_the_cpu_is_refused_before_any_timing(capsys):
    """Half precision is emulated on a CPU: its times (and a roofline reading above 100%) would say nothing."""
    from hf_longdoc.cli import main

    assert main(["bench", "--models", "bert", "--lengths", "64", "--hidden-size", "32", "--num-layers", "1",
                 "--num-heads", "2", "--dtype", "float16", "--device", "cpu", "--output", "unused"]) == 2
    error = capsys.readouterr().err
    assert "--dtype" in error and "bfloat16" in error
