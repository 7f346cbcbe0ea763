"""One settings object from the command line to Trainer: `TrainingOptions`, shared by `RunSettings` (`train`) and
`CompareSettings` (`compare`), checked once; the CLI builds the object by field name."""

import logging
from dataclasses import fields

import pytest

import hf_longdoc.training.run as training
import hf_longdoc.training.settings as run_settings
from hf_longdoc.data import fit_wordpiece_tokenizer
from hf_longdoc.experiments.compare import compare
from hf_longdoc.experiments.settings import CompareSettings
from hf_longdoc.training.run import train
from hf_longdoc.training.settings import RunSettings, TrainingOptions
from tiny_bert import save_tiny_bert


def test_train_and_compare_share_one_definition_of_their_training_options():
    shared = {f.name for f in fields(TrainingOptions)}
    assert {"backbone", "freeze_backbone", "head_epochs", "head_learning_rate", "learning_rate", "lr_scheduler",
            "epochs", "batch_size", "time_budget", "bf16", "fp16", "max_length"} <= shared
    for settings_class in (RunSettings, CompareSettings):
        assert issubclass(settings_class, TrainingOptions)
    # neither declares a shared option again; compare only gives three of them its own defaults
    assert not set(RunSettings.__annotations__) & shared
    assert set(CompareSettings.__annotations__) & shared == {"max_length", "epochs", "learning_rate", "backbone"}


@pytest.mark.parametrize("settings, flag", [
    (CompareSettings(time_budget=0), "time_budget"),
    (CompareSettings(head_learning_rate=1e-3), "head_learning_rate.*--backbone"),  # from scratch: no new parameters
    (CompareSettings(lr_scheduler="cosinus"), "lr_scheduler"),
    (CompareSettings(bf16=True, fp16=True), "bf16"),
    (RunSettings(time_budget=-1.0), "time_budget"),
    (RunSettings(head_learning_rate=1e-3), "head_learning_rate.*--backbone or --init-from"),
])
def test_the_shared_options_are_checked_alike_for_train_and_compare(settings, flag):
    with pytest.raises(ValueError, match=flag):
        settings.resolve() if isinstance(settings, RunSettings) else settings.check()


def test_train_takes_the_settings_object_or_its_keywords_but_not_both(tmp_path):
    settings = RunSettings(output_dir=str(tmp_path / "out"))
    with pytest.raises(TypeError, match="not both"):
        train(settings, epochs=1)
    with pytest.raises(TypeError, match="RunSettings"):
        train({"model": "slstm"})
    with pytest.raises(TypeError, match=r"compare\(\) got unknown arguments \['epoch'\]"):
        compare(epoch=3)


def test_the_backbone_is_checked_once_per_run(tmp_path, monkeypatch):
    """`RunSettings.resolve` checks the backbone; the model is then built around it unchecked (`wrap_backbone`)."""
    texts = ["markets rallied on the news", "the match ended in a draw"] * 10
    backbone = save_tiny_bert(tmp_path / "bert", fit_wordpiece_tokenizer(texts, vocab_size=120, model_max_length=64),
                              max_positions=64)
    checked = []
    original = run_settings.check_backbone
    monkeypatch.setattr(run_settings, "check_backbone", lambda *args: checked.append(args) or original(*args))

    def stop(*args, **kwargs):
        raise KeyboardInterrupt  # the model is about to be built: far enough

    monkeypatch.setattr(training, "wrap_backbone", stop)
    with pytest.raises(KeyboardInterrupt):
        train(model="segment_lm", backbone=backbone, output_dir=str(tmp_path / "out"), task_size=16,
              task_words=(20, 40), max_length=64)
    assert len(checked) == 1


def test_compare_stops_each_model_at_the_time_budget(tmp_path, caplog):
    tiny = CompareSettings(hidden_size=16, num_layers=1, num_heads=2, max_length=96, epochs=3, batch_size=4,
                           vocab_size=300, time_budget=1e-6)
    with caplog.at_level(logging.WARNING, logger="hf_longdoc.training.run"):
        (row,) = compare(tiny, progress=lambda message: None, models=["contextualizer"], baselines=[], evidence=(),
                         task_size=16, task_words=(40, 80), bench_lengths=(), output_dir=str(tmp_path))
    assert "fine-tuning stops after step 1" in caplog.text and row["model"] == "contextualizer"


def test_the_cli_builds_the_settings_by_field_name(tmp_path, monkeypatch):
    """Every flag whose name is a field reaches the settings object `train` receives."""
    from hf_longdoc.cli import main

    received = []
    monkeypatch.setattr(training, "train", lambda settings: received.append(settings) or {"test": {}})
    assert main(["train", "--model", "slstm", "--max-length", "300", "--head-epochs", "0", "--time-budget", "2",
                 "--task-words", "40,80", "--config", "hidden_size=16", "--output-dir", str(tmp_path / "m")]) == 0
    (settings,) = received
    assert isinstance(settings, RunSettings)
    assert (settings.model, settings.max_length, settings.head_epochs, settings.time_budget) == ("slstm", 300, 0, 2.0)
    assert settings.task_words == (40, 80) and settings.config_overrides == {"hidden_size": 16}
