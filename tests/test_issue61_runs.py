"""Issue 61: what `compare`, `bench`, `train` and the CLI say about what ran, and refuse before any work.

A `compare --time-budget` run records the epochs and optimizer steps that ran and marks a cut run; `bench` refuses
lengths whose (n x n) attention tensors cannot fit; `compare --dataset` trains no built-in evidence tasks unless asked;
a plain `train` into a folder that holds an interrupted run is refused; the batch is recorded per process and per
optimizer step; and every numeric flag refuses a negative number with the package's own message.
"""

import pytest
import torch

from hf_longdoc.cli import main
from hf_longdoc.experiments.baselines import square_tensors
from hf_longdoc.experiments.bench import BenchModel, check_bench_fits

GIB = 2**30


# -- bench: the baselines' attention in the memory check -----------------------------------------------------------
@pytest.mark.parametrize("argv, fragments", [
    (["--models", "bert", "--lengths", "10000000", "--attention", "eager"], ["eager attention's scores",
                                                                             "--attention sdpa"]),
    (["--models", "longformer", "--lengths", "3000000"], ["attention mask", "TiB", "sparse_longformer"]),
    (["--models", "bigbird,contextualizer", "--lengths", "512,5000000"], ["bigbird", "probabilities"]),
    (["--models", "modernbert", "--lengths", "5000000", "--backward"], ["sliding-window mask", "training steps"]),
    (["--models", "eurobert", "--lengths", "20000000", "--attention", "eager", "--batch-size", "2"],
     ["eager attention's scores"]),
])
def test_bench_refuses_impossible_attention_before_allocating(argv, fragments, tmp_path, capsys):
    assert main(["bench", *argv, "--output", str(tmp_path / "bench")]) == 2
    err = capsys.readouterr().err
    assert "Traceback" not in err and "needs at least" in err and "available" in err and "--lengths" in err, err
    assert "tokens fit" in err  # the longest length the estimate lets fit
    for fragment in fragments:
        assert fragment in err, err
    assert not list(tmp_path.iterdir())


def test_the_square_tensors_follow_the_attention_and_the_model():
    assert square_tensors("bert", "eager", 2, 4, 4).bytes(1000, 3, True) == 2 * 4 * 4 * 1000**2 * 3
    assert square_tensors("bert", "eager", 2, 4, 4).bytes(1000, 3, False) == 2 * 4 * 4 * 1000**2  # one layer at a time
    assert not square_tensors("bert", "sdpa", 2, 4, 4) and not square_tensors("eurobert", "flash_attention_2", 1, 4, 2)
    longformer = square_tensors("longformer", "eager", 3, 4, 2)  # its mask, once, whatever the layers
    assert longformer.bytes(100, 12, True) == 3 * 2 * 100**2
    assert square_tensors("modernbert", "sdpa", 1, 4, 4).shared == 8
    assert not square_tensors("modernbert", "flex_attention", 1, 4, 4)


def test_sizes_that_fit_pass_the_check(monkeypatch):
    import hf_longdoc.feasibility as feasibility

    monkeypatch.setattr(feasibility, "available_bytes", lambda device=None: 8 * GIB)
    sizes = dict(hidden_size=64, num_layers=2, num_heads=2, window=64)
    entries = [BenchModel.parse(name) for name in ("bert", "longformer", "bigbird", "modernbert", "contextualizer")]
    attentions = {"bert": "eager", "longformer": "eager", "bigbird": "eager", "modernbert": "sdpa"}
    check_bench_fits(entries, (512, 4096), 1, True, torch.device("cpu"), None, attentions, torch.float32, **sizes)
    # SDPA builds no scores: BERT at 100,000 ids passes where eager attention (75 GiB a layer here) is refused
    check_bench_fits(entries[:1], (100_000,), 1, False, torch.device("cpu"), None, {"bert": "sdpa"}, **sizes)
    with pytest.raises(ValueError, match="--attention sdpa"):
        check_bench_fits(entries[:1], (100_000,), 1, False, torch.device("cpu"), None, {"bert": "eager"}, **sizes)
