"""`hf-longdoc train` speaks Transformers' `TrainingArguments` as its own: every field under its own name, the package's
flags as the settings dataclass declares them, aliases where both mean one thing, and a refusal where two spellings
disagree or a value would contradict what the recipe decides. Run through the CLI, as a user runs it."""

import json
import logging
import os
import subprocess
import sys

import pytest
import torch
from safetensors.torch import load_file

import hf_longdoc.training.run as training
from hf_longdoc.cli import build_parser, main
from hf_longdoc.training.run import train
from hf_longdoc.training.settings import RunSettings

TINY = ["--model", "contextualizer", "--config", "hidden_size=16", "num_hidden_layers=1", "hidden_dropout_prob=0.0",
        "--max-length", "96"]


def write_documents(path, count):
    """`count` short labelled documents (two classes, alternating) as JSONL."""
    words = "alpha beta gamma delta epsilon zeta eta theta iota kappa lambda mu".split()
    with open(path, "w") as f:
        for i in range(count):
            label = ("sport", "business")[i % 2]
            text = " ".join(words[(i * 7 + j) % len(words)] for j in range(40 + i % 9))
            f.write(json.dumps({"text": f"{text} the {label} news of the day", "label": label}) + "\n")
    return str(path)


@pytest.fixture(scope="module")
def documents(tmp_path_factory):
    # 40 documents: 8 are carved for test and 4 for validation, leaving 28 to train on, a multiple of 4, so every
    # step of a batch of 4 is two whole steps of 2
    return write_documents(tmp_path_factory.mktemp("data") / "docs.jsonl", 40)


def run_cli(arguments):
    assert main(["train", *arguments]) == 0


@pytest.mark.slow
def test_gradient_accumulation_gives_the_weights_of_a_batch_twice_the_size(documents, tmp_path):
    """`--gradient_accumulation_steps 2` at batch 2 and batch 4 alone take the same optimizer steps on the same
    documents (no dropout, no batch-dependent layer), so they end at the same weights. The Transformers spellings and
    ours are one flag, and `--report_to tensorboard` writes its event files; `--warmup_ratio`, Transformers 4's
    spelling, reads as v5's fractional `--warmup_steps`."""
    common = [*TINY, "--dataset", documents, "--num_train_epochs", "2", "--learning_rate", "3e-3",
              "--warmup_ratio", "0.2"]
    run_cli([*common, "--per_device_train_batch_size", "4", "--output-dir", str(tmp_path / "whole")])
    run_cli([*common, "--batch-size", "2", "--gradient_accumulation_steps", "2", "--report_to", "tensorboard",
             "--logging_steps", "1", "--output_dir", str(tmp_path / "accumulated")])
    whole, accumulated = (load_file(tmp_path / name / "model.safetensors") for name in ("whole", "accumulated"))
    assert whole.keys() == accumulated.keys()
    for name in whole:
        torch.testing.assert_close(accumulated[name], whole[name], atol=2e-5, rtol=1e-4, msg=name)
    arguments = json.loads((tmp_path / "accumulated" / "training_args.json").read_text())
    assert arguments["gradient_accumulation_steps"] == 2 and arguments["per_device_train_batch_size"] == 2
    assert arguments["warmup_steps"] == 0.2 and arguments["report_to"] == ["tensorboard"]
    metrics = json.loads((tmp_path / "accumulated" / "metrics.json").read_text())
    assert metrics["batch_size"] == {"per_process": 2, "processes": 1, "gradient_accumulation": 2,
                                     "per_optimizer_step": 4}
    events = [name for _, _, files in os.walk(tmp_path / "accumulated") for name in files
              if name.startswith("events.out.tfevents")]
    assert events, "tensorboard wrote no event file"


@pytest.mark.slow
def test_torch_compile_trains(documents, tmp_path):
    """`--torch_compile` reaches Trainer, which compiles the model; the saved weights are the plain module's. Traced
    by dynamo and AOTAutograd (forward and backward) without Inductor's code generation (`--torch_compile_backend
    aot_eager`, also a TrainingArguments field): the C++ kernels of the whole model took most of the test's 25 s, and
    what is checked here is Trainer's wrapping, not the kernels (test_slstm.py compiles with Inductor)."""
    run_cli([*TINY, "--dataset", documents, "--epochs", "1", "--max_steps", "2", "--torch_compile",
             "--torch_compile_backend", "aot_eager", "--output-dir", str(tmp_path / "run")])
    arguments = json.loads((tmp_path / "run" / "training_args.json").read_text())
    assert arguments["torch_compile"] is True and arguments["torch_compile_backend"] == "aot_eager"
    assert not any("_orig_mod" in name for name in load_file(tmp_path / "run" / "model.safetensors"))


@pytest.mark.slow
def test_fsdp_trains_under_torchrun_on_the_cpu(documents, tmp_path):
    """Two processes (gloo) train one model with `--fsdp full_shard`, as Accelerate supports on the CPU; the main
    process saves the whole model, not its shard."""
    sys.path.insert(0, os.path.dirname(__file__))
    from torchrun_cli import launch_cli

    result = launch_cli(["train", *TINY, "--dataset", documents, "--epochs", "1", "--fsdp", "full_shard",
                         "--output-dir", "run"], tmp_path)
    assert result.returncode == 0, result.stderr[-3000:]
    arguments = json.loads((tmp_path / "run" / "training_args.json").read_text())
    assert arguments["fsdp"]
    weights = load_file(tmp_path / "run" / "model.safetensors")
    assert weights["classifier.weight"].shape == (2, 16)  # whole: a shard of 2 processes would hold half
    assert result.stdout.count("Saved model") == 1


def parse(arguments):
    """The parsed `train` arguments and the TrainingArguments flags left for `HfArgumentParser`."""
    return build_parser().parse_known_args(["train", "--output-dir", "out", *arguments])


def test_both_spellings_of_one_setting_are_one_flag():
    for spelling in ("--epochs", "--num_train_epochs", "--num-train-epochs"):
        args, rest = parse([spelling, "3"])
        assert args.epochs == 3.0 and rest == []
    args, rest = parse(["--batch_size", "4", "--per-device-train-batch-size", "4", "--lr-scheduler", "cosine"])
    assert args.batch_size == 4 and args.lr_scheduler == "cosine"


def test_two_spellings_that_disagree_are_refused(capsys):
    with pytest.raises(SystemExit):
        parse(["--epochs", "3", "--num_train_epochs", "5"])
    assert "--epochs 3.0 and --num_train_epochs 5.0 are one setting" in capsys.readouterr().err


@pytest.mark.parametrize("flags, message", [
    (["--eval_strategy", "no"], "--eval_strategy 'no' cannot apply: every epoch is evaluated"),
    (["--save_total_limit", "3"], "--save_total_limit 3 cannot apply"),
    (["--resume_from_checkpoint", "x"], "pass --resume"),
    (["--gradient_acumulation_steps", "2"], "unrecognized arguments: --gradient_acumulation_steps 2"),
    (["--push_to_hub"], "--push_to_hub needs --hub_model_id"),
])
def test_what_the_recipe_decides_is_refused_before_any_data_is_read(flags, message, capsys, tmp_path):
    assert main(["train", *TINY, "--dataset", str(tmp_path / "none.jsonl"), "--output-dir", str(tmp_path / "o"),
                 *flags]) == 2
    err = capsys.readouterr().err
    assert message in err and "Traceback" not in err
    assert not (tmp_path / "o").exists()


def test_the_python_api_takes_trainer_fields_by_name_and_refuses_what_the_settings_own(tmp_path):
    with pytest.raises(ValueError, match=r"num_train_epochs \(the option `epochs`\)"):
        train(model="contextualizer", output_dir=str(tmp_path / "o"), training_args={"num_train_epochs": 2})
    with pytest.raises(ValueError, match="gradient_acumulation_steps, which TrainingArguments does not take"):
        train(model="contextualizer", output_dir=str(tmp_path / "o"), training_args={"gradient_acumulation_steps": 2})


def test_each_default_and_help_is_written_once():
    """The train flags come from `RunSettings`' fields: a flag's default is the field's, shown in --help, and the
    command module writes none of them again."""
    from dataclasses import fields

    source = open(os.path.join(os.path.dirname(build_parser.__code__.co_filename), "commands", "train.py")).read()
    assert "default=" not in source and "help=" in source  # --baseline's help, the one CLI-only flag
    documented = [f.name for f in fields(RunSettings) if "help" in f.metadata]
    assert {"max_length", "epochs", "batch_size", "backbone", "freeze_backbone", "time_budget"} <= set(documented)
    help_text = " ".join(build_parser()._subparsers._group_actions[0].choices["train"].format_help().split())
    assert "(default: 4096)" in help_text and "--per-device-train-batch-size BATCH_SIZE" in help_text


def test_help_imports_neither_torch_nor_transformers():
    """`hf-longdoc --help` and `hf-longdoc train --help` import no torch, Transformers or model code (what made them
    take seconds); `import hf_longdoc` registers the families once Transformers is imported."""
    code = ("import sys; from hf_longdoc.cli import main; code = main(sys.argv[1:]);"
            "heavy = [m for m in ('torch', 'transformers', 'hf_longdoc.modeling') if m in sys.modules];"
            "print('HEAVY', heavy)")
    for argv in ([], ["train"], ["compare"], ["predict"], ["bench"], ["attention-map"]):
        result = subprocess.run([sys.executable, "-c", code, *argv, "--help"], capture_output=True, text=True,
                                timeout=120)
        assert "HEAVY []" in result.stdout, (argv, result.stdout[-500:], result.stderr[-2000:])
    registered = subprocess.run([sys.executable, "-c", (
        "import hf_longdoc\nfrom transformers import AutoConfig\nfrom transformers.pipelines import PIPELINE_REGISTRY\n"
        "print(AutoConfig.for_model('contextualizer').model_type, "
        "'long-document-classification' in PIPELINE_REGISTRY.supported_tasks)")],
        capture_output=True, text=True, timeout=300)
    assert "contextualizer True" in registered.stdout, registered.stderr[-2000:]


def no_data(*args, **kwargs):
    raise AssertionError("the data was read before the refusal")


@pytest.fixture
def unreadable_data(monkeypatch):
    """Every way `train` and `compare` read or make data fails the test: a refusal must come before any of them."""
    import hf_longdoc.experiments.compare as comparing

    for module, name in ((training, "load_task"), (comparing, "load_task"), (comparing, "make_long_document_task")):
        monkeypatch.setattr(module, name, no_data)


def refused_in_one_line(argv, message, capsys, tmp_path):
    """Run the CLI; rc 2, and the error is one line holding `message`, with no traceback; nothing was written."""
    assert main([*argv, "--output-dir", str(tmp_path / "o")]) == 2
    err = capsys.readouterr().err
    errors = [line for line in err.splitlines() if ": error: " in line]
    assert len(errors) == 1 and message in errors[0], err[-2000:]
    assert "Traceback" not in err and not (tmp_path / "o").exists()


needs_no_wandb = pytest.mark.skipif(__import__("importlib").util.find_spec("wandb") is not None,
                                    reason="wandb is installed here")


@pytest.mark.parametrize("flags, message", [
    (["--gradient_accumulation_steps", "0"],
     "`gradient_accumulation_steps` (--gradient_accumulation_steps) must be a positive integer, got 0."),
    (["--per_device_eval_batch_size", "0"], "(--per_device_eval_batch_size) must be a positive integer"),
    pytest.param(["--report_to", "wandb"], "--report_to wandb: WandbCallback requires wandb to be installed",
                 marks=needs_no_wandb),
    (["--report_to", "tensorbored"], "--report_to: tensorbored is not supported"),
    (["--warmup_steps", "-1"], "TrainingArguments refuses --warmup_steps -1.0: Got warmup_steps = -1.0"),
    (["--save_steps", "2"], "--save_steps 2.0 cannot apply: every epoch is checkpointed (--save_strategy epoch)"),
    (["--eval_steps", "2"], "--eval_steps 2.0 cannot apply: every epoch is evaluated on validation"),
    (["--eval_delay", "1"], "--eval_delay 1.0 cannot apply"),
    (["--push_to_hub", "--hub_model_id", "me/x"], "--push_to_hub uploads to the Hub, and HF_HUB_OFFLINE=1 is set"),
])
def test_train_checks_every_trainer_value_before_any_data_is_read(flags, message, unreadable_data, capsys, tmp_path,
                                                                  monkeypatch):
    """CRASH-4, CRASH-5, UX-15, SIL-6, SIL-7: Transformers' checks (and those it leaves to Trainer) run when the
    arguments are built, once, before the data."""
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    monkeypatch.setattr("huggingface_hub.constants.HF_HUB_OFFLINE", True)
    refused_in_one_line(["train", *TINY, *flags], message, capsys, tmp_path)


def test_push_to_hub_without_a_token_is_refused_before_training(unreadable_data, capsys, tmp_path, monkeypatch):
    """The check `push` makes (`hub.require_hub_for_push`), before any data is read."""
    monkeypatch.setattr("huggingface_hub.constants.HF_HUB_OFFLINE", False)
    monkeypatch.setattr("huggingface_hub.get_token", lambda: None)
    refused_in_one_line(["train", *TINY, "--push_to_hub", "--hub_model_id", "me/x"],
                        "--push_to_hub needs a Hugging Face token with write access", capsys, tmp_path)


@pytest.mark.parametrize("flags, message", [
    (["--gradient_accumulation_steps", "0"], "(--gradient_accumulation_steps) must be a positive integer, got 0."),
    pytest.param(["--report_to", "wandb"], "--report_to wandb: WandbCallback requires wandb", marks=needs_no_wandb),
    (["--save_steps", "2"], "--save_steps 2.0 cannot apply: compare trains each model for its epochs and measures"),
    (["--eval_strategy", "steps"], "--eval_strategy 'steps' cannot apply: this run sets it to 'no' because compare"),
])
def test_compare_checks_every_trainer_value_before_any_data_is_read(flags, message, unreadable_data, capsys,
                                                                    tmp_path):
    refused_in_one_line(["compare", "--models", "contextualizer", "--baselines", "", "--bench-lengths", "none",
                         *flags], message, capsys, tmp_path)


def test_the_python_api_checks_trainer_values_before_any_data_is_read(unreadable_data, tmp_path):
    with pytest.raises(ValueError, match=r"\(--gradient_accumulation_steps\) must be a positive integer, got 0"):
        train(model="contextualizer", output_dir=str(tmp_path / "o"), training_args={"gradient_accumulation_steps": 0})


def test_max_steps_replaces_the_epochs_and_the_card_says_what_ran(documents, tmp_path, caplog):
    """SIL-5: `--max_steps 2 --epochs 3` trains 2 steps (28 documents at batch 8: 4 steps an epoch, so half of one);
    the log says so, and metrics.json and the card give the steps and the epochs that ran, not the 3 epochs."""
    out = tmp_path / "capped"
    with caplog.at_level(logging.WARNING, logger="hf_longdoc.training.recipe"):
        run_cli([*TINY, "--dataset", documents, "--epochs", "3", "--max_steps", "2", "--output-dir", str(out)])
    assert caplog.text.count("--max_steps 2 replaces the epochs (3)") == 1
    ran = json.loads((out / "metrics.json").read_text())["training"]
    assert ran == {"optimizer_steps": 2, "epochs": 0.5, "planned_epochs": 3.0, "max_steps": 2}
    card = (out / "README.md").read_text()
    assert "| fine-tuning that ran | 2 optimizer steps (0.5 epoch; --max_steps 2 replaced --epochs 3) |" in card
    assert "| epochs |" not in card


def test_compare_report_names_the_step_cap(documents, tmp_path, capsys):
    """UX-16: `compare --max_steps 2` says in report.md that 2 steps replaced the epoch, and the epochs that ran."""
    assert main(["compare", "--dataset", documents, "--models", "contextualizer", "--baselines", "tfidf",
                 "--hidden-size", "16", "--num-layers", "1", "--num-heads", "2", "--max-length", "96",
                 "--vocab-size", "300", "--bench-lengths", "none", "--epochs", "1", "--max_steps", "2",
                 "--output-dir", str(tmp_path / "cmp")]) == 0
    report = (tmp_path / "cmp" / "report.md").read_text()
    assert "2 optimizer steps per model (--max_steps 2 replaced 1 epoch; epochs that ran: contextualizer 0.5)" in report
