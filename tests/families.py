"""The registry the conformance suite is parametrised over: one entry per family (and backbone), tiny awkward sizes."""

from dataclasses import dataclass, field

import torch

import hf_longdoc


@dataclass
class FamilyCase:
    name: str  # the test id
    family: str  # the hf_longdoc family: its classes come from the registry
    tiny: dict  # config kwargs of a tiny model (odd sizes so a hard-coded dimension fails)
    invalid: list = field(default_factory=list)  # (kwargs, fragment of the error message)
    granularity: int = 1  # input lengths come in multiples of this (elements per material)
    first_id: int = 1  # smallest id a random document uses (pad is 0)
    left_padding: bool = True  # whether left padding gives the same logits (else the model refuses it)
    max_length: int = 4096  # longest input the tiny config takes
    mixin_skips: dict = field(default_factory=dict)  # Transformers common tests that do not apply, with the reason
    unused_parameters: tuple = ()  # prefixes of parameters a classifier never uses (by the backbone's design)
    config_tester_kwargs: dict = None  # what Transformers' ConfigTester builds configs from (default: tiny)
    mixin_attributes: dict = field(default_factory=dict)  # ModelTesterMixin switches to set on the test class
    # config kwargs for the mixin's gradient-checkpointing tests, which require every layer call to be checkpointed
    checkpointing_overrides: dict = field(default_factory=dict)
    # how far a fresh process's logits may be from this process's for the same saved model (0: bit-identical)
    cross_process_atol: float = 0.0

    @property
    def registered(self):
        return hf_longdoc.FAMILIES[self.family]

    @property
    def config_class(self):
        return self.registered.config_class

    @property
    def base_class(self):
        return self.registered.model_class

    @property
    def classification_class(self):
        return self.registered.classification_class

    @property
    def masked_lm_class(self):
        return self.registered.heads.get("AutoModelForMaskedLM")

    def config(self, **overrides):
        return self.config_class(**{**self.tiny, **overrides})

    @property
    def vocab_size(self):
        return self.config().vocab_size

    def batch(self, lengths, seed=0, left_padding=False):
        """input_ids/attention_mask of random documents of (about) the given lengths, padded to the longest."""
        g = self.granularity
        lengths = [max(g, -(-length // g) * g) for length in lengths]
        generator = torch.Generator().manual_seed(seed)
        n = max(lengths)
        input_ids = torch.zeros((len(lengths), n), dtype=torch.long)
        attention_mask = torch.zeros((len(lengths), n), dtype=torch.long)
        for row, length in enumerate(lengths):
            span = slice(n - length, n) if left_padding else slice(0, length)
            input_ids[row, span] = torch.randint(self.first_id, self.vocab_size, (length,), generator=generator)
            attention_mask[row, span] = 1
        return input_ids, attention_mask


ALBERT_NO_CHECKPOINTING = "ALBERT's shared layer stack does not support gradient checkpointing"


def _elementwise(backbone, unused_parameters=(), mixin_skips=None, mixin_attributes=None, **backbone_settings):
    settings = {"model_type": backbone, "hidden_size": 32, "num_hidden_layers": 2, "num_attention_heads": 4,
                "intermediate_size": 37, "hidden_dropout_prob": 0.0, "attention_probs_dropout_prob": 0.0,
                "max_position_embeddings": 1024, **backbone_settings}
    return FamilyCase(
        name=f"elementwise-{backbone}",
        family="elementwise",
        tiny=dict(backbone_config=settings, elements_per_material=4, max_materials=1024, num_labels=3,
                  embedding_dropout=0.0),
        invalid=[
            (dict(elements_per_material=3), "elements_per_material"),
            (dict(elements_per_material=8), "attention heads"),
            (dict(element_size=5), "element_size"),
            (dict(mode="chars"), "mode"),
            (dict(max_materials=5000), "max_materials"),
            (dict(embedding_dropout=2.0), "embedding_dropout"),
        ],
        granularity=4,
        first_id=4,
        unused_parameters=unused_parameters,
        left_padding=False,
        mixin_skips={
            "test_resize_tokens_embeddings": "the element vocabulary is fixed at 260 (4 special ids + 256 bytes)",
            "test_resize_embeddings_untied": "the element vocabulary is fixed at 260 (4 special ids + 256 bytes)",
            "test_inputs_embeds": "inputs are element ids; the backbone's inputs_embeds are the materials themselves",
            "test_inputs_embeds_matches_input_ids": "as test_inputs_embeds",
            **(mixin_skips or {}),
        },
        # the default backbone (BERT, width 256, 8 heads): ConfigTester compares flat values, not a nested dict
        config_tester_kwargs=dict(elements_per_material=8, max_materials=64, mode="bytes"),
        mixin_attributes=mixin_attributes or {},
    )


FAMILY_CASES = [
    FamilyCase(
        name="contextualizer",
        family="contextualizer",
        tiny=dict(vocab_size=99, hidden_size=32, rank=37, num_hidden_layers=3, num_labels=3,
                  default_context="learned", hidden_dropout_prob=0.0),
        invalid=[
            (dict(hidden_size=0), "hidden_size"),
            (dict(rank=-3), "rank"),
            (dict(default_context="zeros"), "default_context"),
            (dict(alpha_normalizer="relu"), "alpha_normalizer"),
            (dict(hidden_dropout_prob=1.5), "hidden_dropout_prob"),
            (dict(pad_token_id=500), "pad_token_id"),
        ],
        mixin_skips={
            "test_hidden_states_output": "hidden_states are the per-step context vectors c(k) of shape (batch, "
                                         "hidden), not per-token states; tests/test_contextualizer.py checks them",
        },
    ),
    _elementwise("bert"),
    _elementwise("albert", embedding_size=16, mixin_skips={name: ALBERT_NO_CHECKPOINTING for name in (
        "test_enable_input_require_grads_with_gradient_checkpointing",
        "test_gradient_checkpointing_backward_compatibility", "test_gradient_checkpointing_enable_disable",
        "test_peft_gradient_checkpointing_enable_disable",
        "test_training_gradient_checkpointing", "test_training_gradient_checkpointing_use_reentrant_false",
        "test_training_gradient_checkpointing_use_reentrant_true")}),
    # CANINE's pooler reads the molecules: the upsampling layers serve token outputs only (as in Transformers' own
    # CanineForSequenceClassification).
    _elementwise("canine", unused_parameters=("elementwise.backbone.projection.",
                                              "elementwise.backbone.final_char_encoder."),
                 mixin_attributes={"test_all_params_have_gradient": False},
                 mixin_skips={"test_hidden_states_output": "CANINE returns the states of its three stacks (initial, "
                              "deep, final), as Transformers' own CANINE test allows"},
                 downsampling_rate=2, num_hash_buckets=1024, max_position_embeddings=4096),
    FamilyCase(
        name="slstm",
        family="slstm",
        # eager steps: the 4,096-token checks would otherwise compile the step (the default from 2,048 positions) in
        # each precision, a minute on 2 cores; tests/test_slstm.py checks the compiled step against the reference
        tiny=dict(vocab_size=99, hidden_size=24, num_recurrent_steps=3, window_size=2, num_labels=3,
                  hidden_dropout_prob=0.0, compile_gates=False),
        invalid=[
            (dict(hidden_size=0), "hidden_size"),
            (dict(num_recurrent_steps=0), "num_recurrent_steps"),
            (dict(window_size=0), "window_size"),
            (dict(window_combine="mean"), "window_combine"),
            (dict(position_embedding_type="rotary"), "position_embedding_type"),
            (dict(step_dropout_prob=1.5), "step_dropout_prob"),
        ],
        # measured: about one fresh process in ten rounds the tiny S-LSTM's logits differently (up to 2e-7, with the
        # code of 83c761b as with today's), while every forward within one process is bit-identical
        cross_process_atol=1e-6,
    ),
    FamilyCase(
        name="sparse_longformer",
        family="sparse_longformer",
        # first_n needs no fitted statistics; tests/test_sparse_longformer.py covers the fitted selectors
        tiny=dict(vocab_size=99, hidden_size=32, num_hidden_layers=2, num_attention_heads=4, intermediate_size=37,
                  attention_window=6, max_position_embeddings=4098, num_labels=3, hidden_dropout_prob=0.0,
                  attention_probs_dropout_prob=0.0, pad_token_id=0, bos_token_id=1, eos_token_id=2, sep_token_id=2,
                  global_selector="first_n", num_global_tokens=3),
        invalid=[
            (dict(global_selector="bm25"), "global_selector"),
            (dict(attention_backend="flash"), "attention_backend"),
            (dict(num_global_tokens=-1), "num_global_tokens"),
            (dict(pmi_window=1), "pmi_window"),
            (dict(classifier_pooling="bogus"), "classifier_pooling"),
            (dict(attention_checkpointing="yes"), "attention_checkpointing"),
            (dict(attention_window=5), "attention_window"),
            (dict(hidden_size=30), "num_attention_heads"),
        ],
        first_id=3,
        left_padding=False,  # Longformer reads the first position as [CLS]
        # the head reads [CLS], a global token: in the last layer only the *_global projections shape its state (as
        # in Transformers' LongformerForSequenceClassification)
        unused_parameters=tuple(f"longformer.encoder.layer.1.attention.self.{name}." for name in ("query", "key",
                                                                                                  "value")),
        mixin_skips={"test_retain_grad_hidden_states_attentions": "Longformer's encoder returns the hidden states "
                     "sliced back from the window-padded length: views off the path to the logits (Transformers' "
                     "LongformerForSequenceClassification gives hidden_states[0].grad None too)"},
        max_length=4096,
    ),
    FamilyCase(
        name="sparse_bigbird",
        family="sparse_bigbird",
        # block_size 4 and 1 random block: inputs above (5 + 2) blocks = 28 tokens run block-sparse with first_n's
        # blocks, shorter ones full attention (both paths are conformance-tested)
        tiny=dict(vocab_size=99, hidden_size=32, num_hidden_layers=2, num_attention_heads=4, intermediate_size=37,
                  max_position_embeddings=4096, num_labels=3, hidden_dropout_prob=0.0,
                  attention_probs_dropout_prob=0.0, pad_token_id=0, bos_token_id=1, eos_token_id=2, sep_token_id=2,
                  block_size=4, num_random_blocks=1, global_selector="first_n", num_global_tokens=3),
        invalid=[
            (dict(global_selector="bm25"), "global_selector"),
            (dict(attention_type="sliding"), "attention_type"),
            (dict(num_global_tokens=-1), "num_global_tokens"),
            (dict(block_size=0), "block_size"),
            (dict(hidden_size=30), "num_attention_heads"),
        ],
        first_id=3,
        left_padding=False,  # Big Bird's head reads the first position as [CLS]
        # measured: one clean-clone CI run in several saw a fresh process round the tiny Big Bird's logits differently
        # (9.3e-10, 6 of 9 logits), the S-LSTM's kind of rounding-level difference between processes
        cross_process_atol=1e-6,
        # Transformers' BigBirdForSequenceClassification keeps the base model's pooler, which its head never reads
        unused_parameters=("bert.pooler.",),
        # the mixin's checkpointing tests demand a gradient on every parameter, the pooler too (which Big Bird's
        # head never reads); test_conformance checks that every other parameter gets one
        mixin_attributes={"test_all_params_have_gradient": False},
        max_length=4096,
    ),
    FamilyCase(
        name="segment_lm",
        family="segment_lm",
        tiny=dict(backbone_config={"model_type": "bert", "vocab_size": 99, "hidden_size": 32, "num_hidden_layers": 2,
                                   "num_attention_heads": 4, "intermediate_size": 37, "hidden_dropout_prob": 0.0,
                                   "attention_probs_dropout_prob": 0.0, "max_position_embeddings": 64},
                  variant="att", num_segments=5, segment_length=10, lstm_hidden_size=6, num_labels=3,
                  classifier_dropout=0.0, cls_token_id=1, sep_token_id=2, pad_token_id=0),
        invalid=[
            (dict(variant="lstm"), "variant"),
            (dict(gradient_mode="half"), "gradient_mode"),
            (dict(segment_length=100), "segment_length"),
            (dict(lstm_hidden_size=5), "lstm_hidden_size"),
        ],
        first_id=3,
        left_padding=False,  # segments are cut from the document's first token
        mixin_skips={
            "test_hidden_states_output": "hidden_states are the segment vectors z (and the biLSTM states h), not one "
                                        "state per backbone layer; tests/test_segment_lm.py checks them",
            "test_capture_outputs_decorator": "a segment LM returns no attention maps (its backbone's are per "
                                              "segment), so it takes no output_attentions",
        },
        # the default backbone: ConfigTester compares flat values, not a nested dict
        config_tester_kwargs=dict(variant="rnn", num_segments=4, segment_length=64),
        # segments without gradient are encoded in evaluation mode, where Transformers' layers do not checkpoint
        # (test_segment_lm.py checks checkpointed training in the default setting)
        checkpointing_overrides=dict(stopped_segment_dropout=True),
    ),
]

assert {case.family for case in FAMILY_CASES} == set(hf_longdoc.FAMILIES), "every family needs a conformance entry"
