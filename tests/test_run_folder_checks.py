"""What a run's output folder is checked for before any work: an earlier run that cannot be replaced (found after
the whole training before), and sizes that cannot fit in memory (grown until the kernel killed the process)."""

import subprocess

import pytest

from hf_longdoc.cli import main
from hf_longdoc.modeling import get_family
from hf_longdoc.saving.run_folder import RunFolder
from hf_longdoc.training.feasibility import check_fits, estimate_bytes, parameter_count


@pytest.fixture
def immutable(tmp_path):
    """An earlier run's folder made immutable (`chattr +i`); skipped where the file system cannot."""
    folder = tmp_path / "run"
    folder.mkdir()
    (folder / "notes.txt").write_text("mine")
    if subprocess.run(["chattr", "+i", str(folder)], capture_output=True).returncode:
        pytest.skip("chattr +i is not available here")
    yield folder
    subprocess.run(["chattr", "-i", str(folder)], check=True)


def test_an_earlier_run_that_cannot_be_replaced_is_refused_before_any_work(immutable, capsys):
    with pytest.raises(ValueError, match="cannot be replaced.*chattr -i"):
        RunFolder(immutable).open()
    assert main(["train", "--model", "contextualizer", "--task-size", "20", "--output-dir", str(immutable)]) == 2
    err = capsys.readouterr().err
    assert "cannot be replaced" in err and "Traceback" not in err
    assert not (immutable.parent / ".run.partial").exists()
    assert (immutable / "notes.txt").read_text() == "mine"


def test_a_replaceable_earlier_folder_is_left_as_it_was_by_the_check(tmp_path):
    folder = tmp_path / "run"
    folder.mkdir()
    (folder / "notes.txt").write_text("mine")
    with RunFolder(folder):
        assert folder.is_dir() and (folder / "notes.txt").read_text() == "mine"
        assert not (tmp_path / ".run.previous").exists()
    assert (folder / "notes.txt").read_text() == "mine"


def test_parameters_are_counted_on_the_meta_device_and_extrapolated_over_layers():
    family = get_family("contextualizer")
    config = family.build_config(vocab_size=500, num_labels=2, num_hidden_layers=3)
    model = family.classification_class(config)
    assert parameter_count(family.classification_class, config) == sum(p.numel() for p in model.parameters())
    many = family.build_config(vocab_size=500, num_labels=2, num_hidden_layers=10**5)
    per_layer = (parameter_count(family.classification_class, config)
                 - parameter_count(family.classification_class, family.build_config(vocab_size=500, num_labels=2,
                                                                                    num_hidden_layers=2)))
    assert parameter_count(family.classification_class, many) == sum(p.numel() for p in model.parameters()) + (
        10**5 - 3) * per_layer


def test_an_estimate_past_the_memory_is_refused_with_the_estimate_and_the_flags():
    family = get_family("contextualizer")
    config = family.build_config(vocab_size=500, num_labels=2)
    fits = check_fits(family.classification_class, config, 2, 256, True, "This run", "--max-length")
    assert fits == estimate_bytes(parameter_count(family.classification_class, config), config.hidden_size,
                                  config.num_hidden_layers, 2, 256, True)
    with pytest.raises(ValueError, match=r"This run needs at least .* GiB .* lower --max-length"):
        check_fits(family.classification_class, config, 8, 10**9, True, "This run", "--max-length")


@pytest.mark.parametrize("argv, flag", [
    (["train", "--model", "contextualizer", "--config", "num_hidden_layers=100000"], "num_hidden_layers"),
    (["train", "--model", "slstm", "--max-length", "10000000"], "--max-length"),
    (["bench", "--models", "contextualizer,bert", "--lengths", "100000000"], "--lengths"),
    (["bench", "--models", "bert", "--lengths", "512", "--num-layers", "100000"], "--num-layers"),
])
def test_infeasible_sizes_are_refused_quickly_and_leave_nothing(argv, flag, tmp_path, capsys, monkeypatch):
    monkeypatch.chdir(tmp_path)
    assert main([*argv, *(["--output-dir", "run"] if argv[0] == "train" else [])]) == 2
    err = capsys.readouterr().err
    assert "needs at least" in err and flag in err and "Traceback" not in err
    assert [p.name for p in tmp_path.rglob("*") if p.is_file() or p.name.startswith(".")] == []  # no .partial, .lock
