"""Transformers' own common model tests (`ModelTesterMixin`, `ConfigTester`) run against every hf_longdoc family.

The transformers wheel ships no tests, so the test files of the installed version are taken from its source
distribution (`pip download --no-binary :all: --no-deps`), cached, and given stand-ins for the three modules the
sdist lacks. Skipped cleanly when PyPI cannot be reached. Tests of the mixin that do not apply to a family are skipped
with the reason in `NOT_APPLICABLE`; everything else must pass (record: docs/transformers_common_tests.md).
"""

import importlib
import os
import subprocess
import sys
import tarfile
import tempfile
import unittest

import pytest
import torch
import transformers

from families import FAMILY_CASES

CACHE = os.environ.get(
    "HF_LONGDOC_TEST_CACHE", os.path.join(os.path.expanduser("~"), ".cache", "hf_longdoc", "transformers-tests")
)
PACKAGE = "transformers_common_tests"
STAND_INS = {
    "__init__.py": "",
    "exporters/__init__.py": "",
    "exporters/test_export.py": "class ExportTesterMixin:\n    pass\n",
    "generation/__init__.py": "",
    "generation/test_utils.py": "class GenerationTesterMixin:\n    pass\n",
    "utils/__init__.py": "",
    "utils/test_configuration_utils.py": (
        "config_common_kwargs = {\n"
        "    'return_dict': False, 'output_hidden_states': True, 'dtype': 'float16',\n"
        "    'id2label': {0: 'label'}, 'label2id': {'label': '0'}, 'problem_type': 'regression',\n"
        "    'architectures': ['BertModel'], 'finetuning_task': 'translation',\n"
        "    'tokenizer_class': 'BertTokenizerFast',\n"
        "    'prefix': 'prefix', 'bos_token_id': 6, 'eos_token_id': 8, 'sep_token_id': 9,\n"
        "}\n"
    ),
}


def _fetch_common_tests():
    """Path of a folder holding the package `transformers_common_tests`, fetching the sdist on first use."""
    root = os.path.join(CACHE, transformers.__version__)
    package = os.path.join(root, PACKAGE)
    if os.path.isfile(os.path.join(package, "test_modeling_common.py")):
        return root
    with tempfile.TemporaryDirectory() as download:
        subprocess.run(
            [sys.executable, "-m", "pip", "download", "--quiet", "--no-binary", ":all:", "--no-deps",
             f"transformers=={transformers.__version__}", "-d", download],
            check=True, capture_output=True, timeout=600,
        )
        archive = next(os.path.join(download, name) for name in os.listdir(download) if name.endswith(".tar.gz"))
        os.makedirs(package, exist_ok=True)
        with tarfile.open(archive) as tar:
            for member in tar.getmembers():
                name = os.path.basename(member.name)
                if member.name.endswith(f"/tests/{name}") and name in ("test_modeling_common.py",
                                                                         "test_configuration_common.py"):
                    with open(os.path.join(package, name), "wb") as f:
                        f.write(tar.extractfile(member).read())
    for relative, text in STAND_INS.items():
        path = os.path.join(package, relative)
        os.makedirs(os.path.dirname(path), exist_ok=True)
        with open(path, "w") as f:
            f.write(text)
    return root


try:
    sys.path.insert(0, _fetch_common_tests())
    test_modeling_common = importlib.import_module(f"{PACKAGE}.test_modeling_common")
    test_configuration_common = importlib.import_module(f"{PACKAGE}.test_configuration_common")
except Exception as error:  # no PyPI, or a transformers version whose test files need more stand-ins
    pytest.skip(f"Transformers' common tests unavailable: {type(error).__name__}: {error}", allow_module_level=True)

ModelTesterMixin = test_modeling_common.ModelTesterMixin
ConfigTester = test_configuration_common.ConfigTester

# Why a test of the mixin does not apply to a family: `mixin_skips` of its entry in tests/families.py.
# The mixin trains every class in `all_model_classes`; a base model has no loss, so these run on the heads only.
TRAINING_TESTS = ("test_training", "test_training_gradient_checkpointing",
                  "test_training_gradient_checkpointing_use_reentrant_false",
                  "test_training_gradient_checkpointing_use_reentrant_true")


class FamilyModelTester:
    """Builds the tiny config and inputs of one family for the mixin."""

    def __init__(self, parent, case, batch_size=3, seq_length=12):
        self.parent = parent
        self.case = case
        self.batch_size = batch_size
        self.input_length = seq_length
        self.seq_length = seq_length // case.granularity  # positions the hidden states have (materials)
        self.is_training = True
        self.overrides = {}
        config = self.get_config()
        self.vocab_size = config.vocab_size
        self.hidden_size = config.hidden_size
        self.num_hidden_layers = config.num_hidden_layers
        self.num_labels = config.num_labels

    def get_config(self):
        return self.case.config(num_hidden_layers=2, **self.overrides)  # the mixin asks for at most two layers

    def prepare_config_and_inputs_for_common(self):
        lengths = [self.input_length - self.case.granularity] + [self.input_length] * (self.batch_size - 1)
        input_ids, attention_mask = self.case.batch(lengths)  # one padded row
        return self.get_config(), {"input_ids": input_ids, "attention_mask": attention_mask}


def _make_test_case(case):
    class FamilyModelTest(ModelTesterMixin, unittest.TestCase):
        heads = tuple(case.registered.heads.values())  # the registry's one list
        all_model_classes = (case.base_class, *heads)
        has_attentions = False
        test_torch_exportable = False
        test_resize_embeddings = True

        def setUp(self):
            self.model_tester = FamilyModelTester(self, case)
            settings = case.config_tester_kwargs or {k: v for k, v in case.tiny.items() if k != "num_labels"}
            self.config_tester = ConfigTester(self, config_class=case.config_class, **settings,
                                              common_properties=["hidden_size", "num_hidden_layers", "vocab_size"])

        def _prepare_for_class(self, inputs_dict, model_class, return_labels=False):
            inputs_dict = super()._prepare_for_class(inputs_dict, model_class, return_labels=return_labels)
            if return_labels and model_class is case.classification_class:
                inputs_dict["labels"] = torch.zeros(self.model_tester.batch_size, dtype=torch.long)
            if return_labels and model_class is case.masked_lm_class:
                inputs_dict["labels"] = inputs_dict["input_ids"].clone()
            return inputs_dict

        def test_config(self):
            self.config_tester.run_common_tests()

    def heads_only(test, overrides):
        def run(self):
            self.all_model_classes = FamilyModelTest.heads
            self.model_tester.overrides = overrides
            test(self)

        return run

    for name in TRAINING_TESTS:
        if name not in case.mixin_skips:
            overrides = case.checkpointing_overrides if "checkpointing" in name else {}
            setattr(FamilyModelTest, name, heads_only(getattr(ModelTesterMixin, name), overrides))
    for name, value in case.mixin_attributes.items():
        setattr(FamilyModelTest, name, value)
    for name, reason in case.mixin_skips.items():
        setattr(FamilyModelTest, name, unittest.skip(reason)(lambda self: None))
    title = "".join(part.capitalize() for part in case.name.replace("-", "_").split("_"))
    FamilyModelTest.__name__ = FamilyModelTest.__qualname__ = f"{title}CommonModelTest"
    return FamilyModelTest


for _case in FAMILY_CASES:
    _test_case = _make_test_case(_case)
    globals()[_test_case.__name__] = _test_case
del _case, _test_case
