"""The conformance suite: every family behaves like a Transformers model (parametrised over tests/families.py)."""

import ast
import copy
import os
import subprocess

import psutil
import pytest
import torch
from safetensors.torch import load_file, save_file
from transformers import (
    AutoConfig,
    AutoModel,
    AutoModelForSequenceClassification,
    Trainer,
    TrainingArguments,
)
from transformers.testing_utils import CaptureLogger
from transformers.utils import logging

import ddp_train  # noqa: E402  (tests/ is on sys.path: conftest.py)
from ddp_train import launch  # noqa: E402
from fresh_process import run_without_hf_longdoc
from half_precision import assert_half_precision_agrees

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def _classifier(family, **overrides):
    torch.manual_seed(0)
    return family.classification_class(family.config(**overrides)).eval()


def test_save_load_round_trip_with_auto_classes(family, tmp_path):
    model = _classifier(family)
    input_ids, attention_mask = family.batch([17, 9])
    model.save_pretrained(tmp_path)
    files = set(os.listdir(tmp_path))
    assert "model.safetensors" in files and not any(name.endswith((".bin", ".pt", ".pkl")) for name in files)
    assert AutoConfig.from_pretrained(tmp_path).model_type == model.config.model_type
    loaded = AutoModelForSequenceClassification.from_pretrained(tmp_path).eval()
    assert type(loaded) is family.classification_class
    with torch.no_grad():
        torch.testing.assert_close(loaded(input_ids, attention_mask=attention_mask).logits,
                                   model(input_ids, attention_mask=attention_mask).logits, rtol=0, atol=0)
    base = AutoModel.from_pretrained(tmp_path)
    assert type(base) is family.base_class


def test_saved_folder_carries_auto_map_and_sources(family, tmp_path):
    _classifier(family).save_pretrained(tmp_path)
    config = AutoConfig.from_pretrained(tmp_path)
    assert config.auto_map == family.registered.auto_map  # every Auto class of the registry's one list
    assert {"AutoConfig", "AutoModel", "AutoModelForSequenceClassification"} <= set(config.auto_map)
    for auto, cls in family.registered.auto_classes.items():
        assert cls._auto_class == auto  # saved with remote code under that Auto class
    for reference in config.auto_map.values():
        module = reference.split(".")[0]
        source = tmp_path / f"{module}.py"
        assert source.is_file(), f"{source.name} missing from the saved folder"
        text = source.read_text()
        imported = [node.module or "" for node in ast.walk(ast.parse(text)) if isinstance(node, ast.ImportFrom)]
        imported += [alias.name for node in ast.walk(ast.parse(text)) if isinstance(node, ast.Import)
                     for alias in node.names]
        assert not [name for name in imported if name.startswith("hf_longdoc")], imported  # Hub rule
        assert "from .." not in text


LOAD_AND_PREDICT = """
    import torch
    from safetensors.torch import load_file, save_file
    from transformers import AutoModelForSequenceClassification
    folder, inputs, outputs = sys.argv[1:4]
    model = AutoModelForSequenceClassification.from_pretrained(folder, trust_remote_code=True).eval()
    assert "transformers_modules" in type(model).__module__, type(model).__module__
    batch = load_file(inputs)
    with torch.no_grad():
        logits = model(batch["input_ids"], attention_mask=batch["attention_mask"]).logits
    save_file({"logits": logits.contiguous()}, outputs)
"""


def test_fresh_process_without_hf_longdoc_loads_with_trust_remote_code(family, tmp_path):
    model = _classifier(family)
    model.save_pretrained(tmp_path / "model")
    input_ids, attention_mask = family.batch([23, 11, 5])
    save_file({"input_ids": input_ids, "attention_mask": attention_mask}, str(tmp_path / "inputs.safetensors"))
    run_without_hf_longdoc(LOAD_AND_PREDICT, tmp_path / "model", tmp_path / "inputs.safetensors",
                           tmp_path / "out.safetensors", workdir=tmp_path)
    with torch.no_grad():
        expected = model(input_ids, attention_mask=attention_mask).logits
    # bit-identical, unless the family declares a rounding-level tolerance across processes
    torch.testing.assert_close(load_file(str(tmp_path / "out.safetensors"))["logits"], expected, rtol=0,
                               atol=family.cross_process_atol)


@pytest.mark.parametrize("left_padding", [False, True])
def test_padded_batch_equals_each_document_alone(family, left_padding):
    """Padding never changes a document's logits: on either side, or (families that read from the first position)
    left padding is refused with an error that names the fix."""
    model = _classifier(family)
    lengths = [31, 7, 18, 1]
    input_ids, attention_mask = family.batch(lengths, left_padding=left_padding)
    if left_padding and not family.left_padding:
        with pytest.raises(ValueError, match=r"Rows \[1, 2, 3\].*padding_side = \"right\""):
            model(input_ids, attention_mask=attention_mask)
        return
    with torch.no_grad():
        batched = model(input_ids, attention_mask=attention_mask).logits
        for row in range(len(lengths)):
            keep = attention_mask[row].bool()
            alone = model(input_ids[row, keep][None]).logits
            torch.testing.assert_close(batched[row: row + 1], alone, rtol=0, atol=1e-5)


def test_deterministic_under_a_seed(family):
    input_ids, attention_mask = family.batch([12, 20])
    outputs = []
    for _ in range(2):
        torch.manual_seed(123)
        model = family.classification_class(family.config(hidden_dropout_prob=0.1)).train()
        outputs.append(model(input_ids, attention_mask=attention_mask).logits)  # dropout drawn from the seed too
    torch.testing.assert_close(outputs[0], outputs[1], rtol=0, atol=0)


def test_every_trainable_parameter_gets_a_gradient(family):
    model = _classifier(family).train()
    input_ids, attention_mask = family.batch([15, 9, 21])
    loss = model(input_ids, attention_mask=attention_mask, labels=torch.tensor([0, 2, 1])).loss
    loss.backward()
    missing = [name for name, p in model.named_parameters()
               if p.requires_grad and (p.grad is None or not torch.any(p.grad != 0))
               and not name.startswith(family.unused_parameters)]
    assert not missing, f"no gradient reaches {missing}"


def test_one_trainer_step_on_cpu(family, tmp_path):
    model = _classifier(family).train()
    before = copy.deepcopy(model.state_dict())
    rows = []
    for length, label in ((13, 0), (29, 1), (8, 2), (17, 1)):
        input_ids, attention_mask = family.batch([length], seed=length)
        rows.append({"input_ids": input_ids[0].tolist(), "attention_mask": attention_mask[0].tolist(), "label": label})

    def collate(features):
        n = max(len(f["input_ids"]) for f in features)
        pad = lambda values: values + [0] * (n - len(values))  # noqa: E731
        return {
            "input_ids": torch.tensor([pad(f["input_ids"]) for f in features]),
            "attention_mask": torch.tensor([pad(f["attention_mask"]) for f in features]),
            "labels": torch.tensor([f["label"] for f in features]),
        }

    args = TrainingArguments(output_dir=str(tmp_path), max_steps=1, per_device_train_batch_size=4, use_cpu=True,
                             report_to="none", learning_rate=1e-2, save_strategy="no")
    result = Trainer(model=model, args=args, train_dataset=rows, data_collator=collate).train()
    assert torch.isfinite(torch.tensor(result.training_loss))
    changed = [name for name, value in model.state_dict().items() if not torch.equal(value, before[name])]
    assert changed, "the Trainer step changed no weight"


def test_gradient_checkpointing_gives_the_same_gradients(family):
    input_ids, attention_mask = family.batch([19, 12])
    labels = torch.tensor([1, 0])
    if not _classifier(family).supports_gradient_checkpointing:
        pytest.skip(f"{family.name}: the backbone does not support gradient checkpointing")
    gradients = []
    for checkpointing in (False, True):
        model = _classifier(family).train()
        if checkpointing:
            model.gradient_checkpointing_enable(gradient_checkpointing_kwargs={"use_reentrant": False})
            assert model.is_gradient_checkpointing
        model(input_ids, attention_mask=attention_mask, labels=labels).loss.backward()
        gradients.append({name: p.grad.clone() for name, p in model.named_parameters() if p.grad is not None})
    assert gradients[0].keys() == gradients[1].keys()
    for name in gradients[0]:
        torch.testing.assert_close(gradients[0][name], gradients[1][name], rtol=1e-5, atol=1e-6, msg=name)


def test_return_dict_false_tuple_equals_dataclass(family):
    model = _classifier(family)
    input_ids, attention_mask = family.batch([10, 6])
    labels = torch.tensor([0, 1])
    with torch.no_grad():
        as_dict = model(input_ids, attention_mask=attention_mask, labels=labels, output_hidden_states=True)
        as_tuple = model(input_ids, attention_mask=attention_mask, labels=labels, output_hidden_states=True,
                         return_dict=False)
    assert isinstance(as_tuple, tuple)
    expected = as_dict.to_tuple()
    assert len(as_tuple) == len(expected)
    for got, want in zip(as_tuple, expected):
        if isinstance(want, tuple):
            for g, w in zip(got, want):
                torch.testing.assert_close(g, w, rtol=0, atol=0)
        else:
            torch.testing.assert_close(got, want, rtol=0, atol=0)
    base = family.base_class(model.config).eval()
    with torch.no_grad():
        base_tuple = base(input_ids, attention_mask=attention_mask, return_dict=False)
        base_dict = base(input_ids, attention_mask=attention_mask)
    torch.testing.assert_close(base_tuple[0], base_dict.last_hidden_state, rtol=0, atol=0)


def test_config_return_dict_false_gives_the_same_tuple(family):
    """`return_dict=False` set in the config (as `from_pretrained(path, return_dict=False)` sets it) gives the tuple
    the argument gives: Transformers' Big Bird head read `.last_hidden_state` off its encoder's tuple there."""
    model = _classifier(family)
    input_ids, attention_mask = family.batch([10, 6])
    labels = torch.tensor([0, 1])
    with torch.no_grad():
        expected = model(input_ids, attention_mask=attention_mask, labels=labels, return_dict=False)
        model.config.return_dict = False
        got = model(input_ids, attention_mask=attention_mask, labels=labels)
    assert isinstance(got, tuple) and len(got) == len(expected)
    for g, w in zip(got, expected):
        torch.testing.assert_close(g, w, rtol=0, atol=0)


def test_bf16_autocast_forward(family):
    model = _classifier(family)
    input_ids, attention_mask = family.batch([300, 120])
    with torch.no_grad():
        reference = model(input_ids, attention_mask=attention_mask).logits
        with torch.autocast("cpu", dtype=torch.bfloat16):
            logits = model(input_ids, attention_mask=attention_mask).logits
    assert torch.isfinite(logits).all()
    torch.testing.assert_close(logits.float(), reference, rtol=0.05, atol=0.05)


def test_fp16_half_forward_on_4096_tokens(family):
    model = _classifier(family).half()
    input_ids, attention_mask = family.batch([family.max_length, 3000])
    with torch.no_grad():
        outputs = model(input_ids, attention_mask=attention_mask, output_hidden_states=True)
        reference = _classifier(family)(input_ids, attention_mask=attention_mask).logits
    assert outputs.logits.dtype == torch.float16
    assert torch.isfinite(outputs.logits).all()
    assert all(torch.isfinite(h).all() for h in outputs.hidden_states)
    torch.testing.assert_close(outputs.logits.float(), reference, rtol=0.02, atol=0.02)


# --- bad input -----------------------------------------------------------------------------------------------------


def test_empty_batch_raises(family):
    model = _classifier(family)
    with pytest.raises(ValueError, match="empty"):
        model(torch.zeros((0, 5), dtype=torch.long))
    with pytest.raises(ValueError, match="empty"):
        model(torch.zeros((2, 0), dtype=torch.long))


def test_all_padding_row_raises(family):
    model = _classifier(family)
    input_ids, attention_mask = family.batch([5, 5])
    attention_mask[1] = 0
    with pytest.raises(ValueError, match=r"Rows \[1\].*no real"):
        model(input_ids, attention_mask=attention_mask)


def test_wrong_label_shape_raises(family):
    model = _classifier(family)
    input_ids, attention_mask = family.batch([5, 7])
    with pytest.raises(ValueError, match="labels"):
        model(input_ids, attention_mask=attention_mask, labels=torch.tensor([0, 1, 2]))
    with pytest.raises(ValueError, match="labels"):
        model(input_ids, attention_mask=attention_mask, labels=torch.tensor([0, 7]))
    multi = _classifier(family, problem_type="multi_label_classification")
    with pytest.raises(ValueError, match="multi-hot"):
        multi(input_ids, attention_mask=attention_mask, labels=torch.ones(2, 5))


def test_out_of_vocabulary_ids_and_bad_mask_raise(family):
    model = _classifier(family)
    input_ids, attention_mask = family.batch([5, 7])
    with pytest.raises(ValueError, match="vocab"):
        model(input_ids + model.config.vocab_size, attention_mask=attention_mask)
    with pytest.raises(ValueError, match="attention_mask"):
        model(input_ids, attention_mask=attention_mask[:, :3])
    with pytest.raises(ValueError, match="input_ids"):
        model(input_ids[0])


def test_invalid_config_values_raise(family):
    for kwargs, fragment in family.invalid:
        with pytest.raises(ValueError, match=fragment):
            family.config(**kwargs)


def test_invalid_values_given_to_from_pretrained_raise(family, tmp_path):
    """`from_pretrained(folder, key=value)` sets each value after the config's `__init__` (Transformers' rule): the
    same refusals as building the config, for the config and for the model, instead of a model that runs with the
    bad value and saves a folder that no longer loads."""
    from transformers import AutoConfig, AutoModelForSequenceClassification

    _classifier(family).save_pretrained(tmp_path)
    for kwargs, _ in family.invalid:  # refused, naming the setting (the saved sizes may refuse it first)
        with pytest.raises(ValueError, match="|".join(kwargs)):
            AutoConfig.from_pretrained(tmp_path, **kwargs)
    kwargs, _ = family.invalid[-1]
    with pytest.raises(ValueError, match="|".join(kwargs)):
        AutoModelForSequenceClassification.from_pretrained(tmp_path, **kwargs)


@pytest.mark.slow
def test_two_process_ddp_trainer_run(family, ddp, tmp_path):
    """torchrun --nproc_per_node 2 with gloo on CPU: a few Trainer steps, both ranks finish with equal weights."""
    result, weights = ddp.run(family.name, tmp_path)
    assert weights is not None, result.stdout[-2000:] + result.stderr[-4000:]
    for name in weights[0]:
        torch.testing.assert_close(weights[0][name], weights[1][name], rtol=0, atol=0, msg=name)


@pytest.mark.slow
def test_a_launch_that_outlives_its_timeout_leaves_no_rank_running(tmp_path, monkeypatch):
    """torchrun gives each rank a session of its own: the timeout must kill them too, or a hung rank outlives the test
    (it did, holding a core through the rest of a CI run). 4 s is past the ranks' start, well before they finish."""
    monkeypatch.setattr(ddp_train, "LAUNCH_TIMEOUTS", (4, 5))
    with pytest.raises(subprocess.TimeoutExpired):
        launch("contextualizer", tmp_path)
    left = [process.pid for process in psutil.process_iter(["cmdline"])
            if str(tmp_path) in " ".join(process.info["cmdline"] or [])]
    assert not left


CORPUS = [f"document {i} about reactors, valves and {'pumps ' * (i % 5)}with a closing remark." for i in range(24)]


def _tokenizer_and_model(family, max_length):
    """The family's tokenizer as `hf-longdoc train` makes it, returning `token_type_ids` as BERT's tokenizers do (the
    elementwise tokenizer has none), and a tiny classifier for it."""
    registered = family.registered
    config = family.config()
    tokenizer = registered.tokenizer_for(config, CORPUS, vocab_size=80, max_length=max_length)
    if not registered.has_own_tokenizer:
        tokenizer.model_input_names = ["input_ids", "token_type_ids", "attention_mask"]
        config = family.config(vocab_size=len(tokenizer), pad_token_id=tokenizer.pad_token_id,
                               **registered.token_settings(tokenizer))
    torch.manual_seed(0)
    return tokenizer, family.classification_class(config).eval()


def test_tokenizer_output_trainer_and_pipeline_work_as_is(family, tmp_path):
    """`model(**tokenizer(...))`, Trainer with DataCollatorWithPadding and `pipeline` on a saved folder, with the
    tokenizer's own outputs (token_type_ids included) and a document far longer than the model reads."""
    from transformers import DataCollatorWithPadding, pipeline

    tokenizer, model = _tokenizer_and_model(family, max_length=min(family.max_length, 64))
    encoded = tokenizer(CORPUS[:3], padding=True, truncation=True, return_tensors="pt")
    assert family.registered.has_own_tokenizer or "token_type_ids" in encoded
    with torch.no_grad():
        assert model(**encoded).logits.shape == (3, 3)

    rows = [dict(tokenizer(text, truncation=True), label=i % 3) for i, text in enumerate(CORPUS[:8])]
    args = TrainingArguments(output_dir=str(tmp_path / "run"), max_steps=1, per_device_train_batch_size=4,
                             use_cpu=True, report_to="none", save_strategy="no")
    collator = DataCollatorWithPadding(tokenizer)
    Trainer(model=model.train(), args=args, train_dataset=rows, data_collator=collator).train()

    model.eval().save_pretrained(tmp_path / "model")
    tokenizer.save_pretrained(tmp_path / "model")
    classify = pipeline("text-classification", model=str(tmp_path / "model"), device="cpu")
    long_document = " ".join(CORPUS) * 20  # far past what the model reads
    for text in (CORPUS[0], long_document):
        (prediction,) = classify(text, truncation=True)
        assert prediction["label"] in model.config.id2label.values() and 0 <= prediction["score"] <= 1
    # without truncation=True the whole text reaches the model: it reads what it can and says it cut the rest
    module_logger = logging.get_logger(type(model).__module__)
    type(module_logger).warning_once.cache_clear()  # Transformers warns once per message and process
    with CaptureLogger(module_logger) as captured:
        (untruncated,) = classify(long_document + " a unique tail")
    assert untruncated["label"] in model.config.id2label.values()
    if family.registered.reading_length(model.config) is not None:
        assert "read" in captured.out and "ignor" in captured.out, captured.out


@pytest.mark.parametrize("text", ["", "\u200b\u200b", "   "])
def test_a_document_without_content_gets_a_prediction_alone_and_in_a_batch(family, text):
    """An empty document (or one of only zero-width or blank characters) is [CLS] [SEP] after tokenizing: a valid
    prediction alone, the same one inside a padded batch, and a finite loss with a gradient when trained on."""
    tokenizer, model = _tokenizer_and_model(family, max_length=min(family.max_length, 64))
    alone = tokenizer([text], return_tensors="pt", truncation=True)
    batch = tokenizer([text, "the cat sat on the mat today", text], return_tensors="pt", padding=True,
                      truncation=True)
    with torch.no_grad():
        single, batched = model(**alone).logits, model(**batch).logits
    assert torch.isfinite(single).all() and torch.isfinite(batched).all()
    torch.testing.assert_close(single, batched[:1], atol=1e-5, rtol=0)
    loss = model.train()(**batch, labels=torch.tensor([0, 1, 2])).loss
    loss.backward()
    assert torch.isfinite(loss)


def test_a_classifier_needs_at_least_one_label(family):
    with pytest.raises(ValueError, match="num_labels"):
        family.config(num_labels=0)


def test_forward_accepts_output_attentions_and_output_hidden_states(family):
    """`model(..., output_attentions=True, output_hidden_states=True)`, as callers of any Transformers model write it:
    the answer does not change; hidden states come back; attentions are what the family has (its docstring says
    what; None where it has none, as the S-LSTM)."""
    model = _classifier(family)
    input_ids, attention_mask = family.batch([17, 9])
    with torch.no_grad():
        plain = model(input_ids, attention_mask=attention_mask)
        both = model(input_ids, attention_mask=attention_mask, output_attentions=True, output_hidden_states=True)
        base = model.base_model(input_ids, attention_mask=attention_mask, output_attentions=True,
                                output_hidden_states=True)
    torch.testing.assert_close(both.logits, plain.logits, rtol=1e-5, atol=1e-6)
    assert isinstance(both.hidden_states, tuple) and len(both.hidden_states) >= 1
    assert isinstance(base.hidden_states, tuple) and len(base.hidden_states) >= 1
    for outputs in (both, base):
        assert outputs.attentions is None or all(torch.isfinite(a).all() for a in outputs.attentions)


def test_the_long_document_pipeline_reads_a_20000_word_document_in_chunks(family, tmp_path):
    """`pipeline("long-document-classification")` around every family: the whole document is read, in chunks of
    what the model reads (one chunk when it reads any length), and the output says how many."""
    from transformers import pipeline

    tokenizer, model = _tokenizer_and_model(family, max_length=min(family.max_length, 64))
    model.save_pretrained(tmp_path / "model")
    tokenizer.save_pretrained(tmp_path / "model")
    classify = pipeline("long-document-classification", model=str(tmp_path / "model"), device="cpu", batch_size=16)
    words = " ".join(CORPUS).split()
    document = " ".join(words[i % len(words)] for i in range(20_000))
    result = classify(document)
    assert result["label"] in model.config.id2label.values()
    assert abs(sum(result["scores"].values()) - 1) < 1e-5
    reads = min(filter(None, (family.registered.reading_length(model.config), tokenizer.model_max_length)))
    total = len(tokenizer(document, add_special_tokens=False, verbose=False)["input_ids"])
    assert total / reads <= result["chunks"] <= 2 * total / reads + 1


def test_half_precision_gives_finite_logits_and_fp32s_predictions_on_padded_batches(family, tmp_path):
    """bf16 (autocast and bf16 weights) and fp16 (`.half()`, which the CPU runs) on a right-padded batch of texts
    of several lengths (SDPA BERT gave NaN with bf16 and padding: transformers #31035). The classifier's weights are
    drawn at scale 1 so that the predictions depend on the features rather than on rounding."""
    tokenizer, model = _tokenizer_and_model(family, max_length=min(family.max_length, 64))
    classifier = [m for m in model.modules() if isinstance(m, torch.nn.Linear) and m.out_features == 3][-1]
    with torch.no_grad():
        classifier.weight.normal_(0, 1)
    model.save_pretrained(tmp_path)
    texts = [" ".join(CORPUS[i: i + 1 + i % 4]) for i in range(12)]
    encoded = tokenizer(texts, padding=True, truncation=True, return_tensors="pt")
    assert not encoded["attention_mask"].bool().all()  # padded
    assert_half_precision_agrees(model, tmp_path, encoded)
