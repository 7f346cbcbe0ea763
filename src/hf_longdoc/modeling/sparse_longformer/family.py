"""The registry entries of the thesis' two families, `sparse_longformer` and `sparse_bigbird`: how each loads a
pretrained checkpoint, the statistics they fit before training, what their frozen backbone gives the head, their
paper and training defaults. Both live in this folder because they share the selection code (selection.py).

Not part of a saved model's remote code (only the configuration and modeling files are): the package reads it, the
Hub never does.
"""

import logging

from torch.nn import functional as F
from transformers import AutoConfig, AutoTokenizer

from ...utils.catalog import EVIDENCE_WEIGHTS
from ..backbones import declared_pooling, sentence_transformers_file
from ..registry import Family, register_family, special_token_ids
from .configuration_sparse_bigbird import ATTENTION_TYPES as BIGBIRD_ATTENTION_TYPES
from .configuration_sparse_bigbird import SparseBigBirdConfig
from .configuration_sparse_longformer import ATTENTION_BACKENDS, GLOBAL_SELECTORS, SparseLongformerConfig
from .modeling_sparse_bigbird import SparseBigBirdForSequenceClassification, SparseBigBirdModel
from .modeling_sparse_longformer import (
    SparseLongformerForSequenceClassification,
    SparseLongformerModel,
    bert_like_refusal,
)

logger = logging.getLogger(__name__)

# the sparse-map families' paper (Longformer and Big Bird are its two backbones)
THESIS_TITLE = "Transformers Using Local Attention Mappings for Long Text Document Classification"
THESIS_CITATION = (
    "@mastersthesis{haman2023local,\n"
    f"  title={{{THESIS_TITLE}}},\n"
    "  author={Haman, Bekir Ufuk},\n"
    "  school={{\\.I}zmir Institute of Technology},\n  year={2023},\n"
    "  note={Refined Patents data: https://huggingface.co/datasets/ufukhaman/uspto_balanced_200k_ipc_classification}\n}"
)
SPARSE_LONGFORMER_TOKENS = {"bos_token_id": "start", "eos_token_id": "end", "sep_token_id": "end"}  # Longformer's names
# `train` and `compare` fine-tune the sparse Longformer without dropout on the attention probabilities: with it,
# PyTorch's CPU attention cannot use its fused kernel and a training step at window 512 is 3-4x slower (hidden-state
# dropout stays on); `--config attention_probs_dropout_prob=0.1` restores Longformer's value
SPARSE_LONGFORMER_TRAIN_DEFAULTS = {"attention_probs_dropout_prob": 0.0}


class SparseMapFamily(Family):
    """What the thesis' two families share: its paper, Longformer's token names, the fine-tuning policy from
    pretrained weights, and the TF-IDF / PMI statistics fitted before training. Not registered itself."""

    paper_title = THESIS_TITLE
    paper_citation = THESIS_CITATION
    defaults = SPARSE_LONGFORMER_TRAIN_DEFAULTS
    learning_rate = 1e-4
    # from a pretrained checkpoint: fine-tuning at 1e-4 lost the head stage's warm start on reviews after news, and
    # 2e-5, the low end of BERT's fine-tuning rates (Devlin et al., https://arxiv.org/abs/1810.04805, Appendix A.3),
    # dropped less; two epochs, because a step over thousands of tokens is slow on a CPU. Big Bird takes the same
    # policy, untested on Big Bird itself. Measured: https://github.com/hf-longdoc/hf_longdoc/blob/main/docs/results.md#the-sparse-longformer-around-minilm-converted
    backbone_learning_rate = 2e-5
    backbone_epochs = 2
    special_tokens = SPARSE_LONGFORMER_TOKENS

    def fit_statistics(self, model, input_ids, tokenizer):
        """Fit TF-IDF and PMI on the training documents when the selector needs them, unless the model holds them
        already (one started from a fitted model)."""
        if model.config.global_selector not in ("tfidf", "pmi"):
            return None
        selector = model.base_model.selector
        if int(selector.idf_num_documents) and int(selector.pmi_num_documents):
            return None
        return model.fit_global_selector(input_ids, tokenizer=tokenizer)


class SparseLongformerFamily(SparseMapFamily):
    """The sparse-map Longformer: Longformer checkpoints as they are, BERT/RoBERTa ones converted; its global tokens
    are its evidence."""

    name = "sparse_longformer"
    config_class = SparseLongformerConfig
    model_class = SparseLongformerModel
    heads = {"AutoModelForSequenceClassification": SparseLongformerForSequenceClassification}
    summary = (
        "A Longformer (sliding-window attention plus global tokens; Longformer checkpoints load unchanged) whose "
        "global tokens are chosen per document by TF-IDF or PMI statistics fitted on the training documents "
        "(or randomly, or the first n), instead of [CLS] alone."
    )
    defaults = {"num_global_tokens": 64, **SPARSE_LONGFORMER_TRAIN_DEFAULTS}
    variants = {"global_selector": GLOBAL_SELECTORS, "attention_backend": ATTENTION_BACKENDS}
    bench_reference = ("longformer", "speedup")  # our model on Transformers' own attention
    card_settings = ("hidden_size", "num_hidden_layers", "num_attention_heads", "vocab_size", "attention_window",
                     "global_selector", "num_global_tokens", "max_position_embeddings",
                     "attention_probs_dropout_prob", "classifier_pooling")
    runtime_settings = ("attention_backend", "attention_checkpointing")

    def reading_length(self, config):
        """RoBERTa-style positions start after the pad id."""
        return config.max_position_embeddings - config.pad_token_id - 1

    def padding_length(self, config):
        """Longformer pads an input to a multiple of its attention window."""
        window = config.attention_window
        return max(window) if isinstance(window, (list, tuple)) else window

    def from_backbone(self, path, tokenizer, max_length, **settings):
        """A Longformer checkpoint as it is, or a BERT/RoBERTa checkpoint converted to `max_length` tokens; the
        special token ids come from its tokenizer (a BERT config holds none)."""
        tokenizer = tokenizer if tokenizer is not None else AutoTokenizer.from_pretrained(path)
        settings = {**SPARSE_LONGFORMER_TRAIN_DEFAULTS, **special_token_ids(tokenizer, SPARSE_LONGFORMER_TOKENS),
                    **settings}
        converting = AutoConfig.from_pretrained(path).model_type not in ("longformer", "sparse_longformer")
        if "classifier_pooling" not in settings:
            if declared_pooling(path) == "mean":
                # the gate starts as that mean and learns which tokens carry the label, which read reviews after
                # news better than the plain mean did; measured:
                # https://github.com/hf-longdoc/hf_longdoc/blob/main/docs/results.md#the-sparse-longformers-two-mean-readouts-on-a-gpu-nvidia-h200-fp16
                settings["classifier_pooling"] = "gated"
                logger.info("%s embeds text by the mean of its token states (its sentence-transformers Pooling "
                            "module): the classifier reads a gated mean of them, which starts as that mean, not [CLS] "
                            "(--config classifier_pooling=mean for the plain mean, cls for the thesis').", path)
            elif converting and sentence_transformers_file(path, "modules.json") is None:  # e.g. copied without them
                logger.info("%s declares no sentence embedding (no sentence-transformers modules.json and Pooling "
                            "folder): the classifier reads [CLS], the thesis' (--config classifier_pooling=mean for "
                            "the token mean).", path)
        if settings["attention_probs_dropout_prob"] == 0.0:
            logger.info("Fine-tuning without attention-probability dropout (the fused CPU attention kernel has none; "
                        "--config attention_probs_dropout_prob=0.1 restores the checkpoint's, at 3-4x the step time).")
        if not converting:
            return SparseLongformerForSequenceClassification.from_pretrained(path, **settings), tokenizer
        model = SparseLongformerForSequenceClassification.from_bert_like_pretrained(path, max_length=max_length,
                                                                                    **settings)
        return model, tokenizer

    def backbone_refusal(self, backbone_config):
        """None for a Longformer checkpoint (it loads as it is) or one `from_bert_like_pretrained` converts."""
        if backbone_config.model_type in ("longformer", "sparse_longformer"):
            return None
        return bert_like_refusal(backbone_config)

    def frozen_features(self, model, input_ids, attention_mask):
        """What the classification head reads, computed by the frozen encoder: (b, 1, d), [CLS] or the token mean
        (`classifier_pooling`); for `"gated"`, whose gates train with the head, every final state and the mask,
        zero-padded to the model's reading length so that batches stack: (b, L, d) and (b, L)."""
        states = model.longformer(input_ids, attention_mask=attention_mask, return_dict=True).last_hidden_state
        if model.token_gate is None:
            return (model.pooled_state(states, attention_mask),)
        missing = self.reading_length(model.config) - states.shape[1]
        mask = attention_mask[:, :states.shape[1]]
        return F.pad(states, (0, 0, 0, missing)), F.pad(mask, (0, missing))

    def head_logits(self, model, *features):
        """The classifier on `frozen_features`: the pooled state, or every state and the mask (`"gated"`)."""
        return model.classifier(model.pooled_state(*features) if model.token_gate is not None else features[0])

    evidence_weight = EVIDENCE_WEIGHTS["sparse_longformer"]

    def evidence(self, model, outputs, input_ids, attention_mask):
        """The global tokens the selector chose for each document (those every position attends to; [CLS] aside),
        each a one-token passage weighed by the score the selector ranked it by: TF-IDF, tf·idf of its token; PMI,
        the sum of its pairs' PMI (`pmi_selection="sum"`) or minus its place in the list of the document's best pairs
        ("pairs")."""
        chosen = model.select_global_tokens(input_ids, attention_mask).cpu()  # (b, n), what forward chose
        scores, _ = model.base_model.selector.scores(input_ids, attention_mask.bool())
        scores = scores.float().cpu()  # (b, n)
        return [[(i, i + 1, float(scores[row, i])) for i in chosen[row].nonzero().flatten().tolist() if i != 0]
                for row in range(len(chosen))]

    def evidence_refusal(self, config):
        if config.global_selector in ("tfidf", "pmi") and config.num_global_tokens > 0:
            return None
        return (f"global_selector={config.global_selector!r} picks its global tokens by position or at random, not by "
                "what they say (and num_global_tokens > 0 is needed); a model with global_selector 'tfidf' or 'pmi' "
                "can be explained")


class SparseBigBirdFamily(SparseMapFamily):
    """The sparse-map Big Bird: Big Bird checkpoints as they are; its head reads the final [CLS] state."""

    name = "sparse_bigbird"
    config_class = SparseBigBirdConfig
    model_class = SparseBigBirdModel
    heads = {"AutoModelForSequenceClassification": SparseBigBirdForSequenceClassification}
    summary = (
        "Big Bird (global, sliding and random blocks; Big Bird checkpoints load unchanged) whose random blocks "
        "are replaced, per document, by the blocks holding the tokens TF-IDF or PMI statistics (or random, or "
        "first-n selection) pick: the thesis' second backbone. `cls` is vanilla Big Bird."
    )
    variants = {"global_selector": GLOBAL_SELECTORS, "attention_type": BIGBIRD_ATTENTION_TYPES}
    card_settings = ("hidden_size", "num_hidden_layers", "num_attention_heads", "vocab_size", "attention_type",
                     "block_size", "num_random_blocks", "global_selector", "num_global_tokens",
                     "max_position_embeddings", "attention_probs_dropout_prob")

    def square_bytes(self, config, batch_size, element_bytes):
        """Transformers' Big Bird attention builds batch x heads x n x n probabilities in every layer, in its
        block-sparse mode too (measured with `bench`: peak 514 MiB at 4,096 ids, 5,101 MiB at 16,384, 4 heads)."""
        return 0, batch_size * config.num_attention_heads * element_bytes, \
            "Big Bird's attention probabilities (batch x heads x n x n, every layer)"

    def reading_length(self, config):
        return config.max_position_embeddings

    def from_backbone(self, path, tokenizer, max_length, **settings):
        """A Big Bird checkpoint as it is (any other model type: a ValueError saying what loads)."""
        model_type = AutoConfig.from_pretrained(path).model_type
        if model_type not in ("big_bird", "sparse_bigbird"):
            raise ValueError(f"--backbone {path} is a {model_type!r} model; sparse_bigbird loads Big Bird checkpoints "
                             "(model_type 'big_bird'). For a BERT or RoBERTa checkpoint use --model sparse_longformer, "
                             "which converts it to a long model.")
        tokenizer = tokenizer if tokenizer is not None else AutoTokenizer.from_pretrained(path)
        settings = {**SPARSE_LONGFORMER_TRAIN_DEFAULTS, **settings}
        return SparseBigBirdForSequenceClassification.from_pretrained(path, **settings), tokenizer

    def backbone_refusal(self, backbone_config):
        if backbone_config.model_type not in ("big_bird", "sparse_bigbird"):
            return (f"holds a {backbone_config.model_type!r} checkpoint; sparse_bigbird loads Big Bird checkpoints "
                    "(model_type 'big_bird') as they are and converts none")
        return None

    def frozen_features(self, model, input_ids, attention_mask):
        """The final [CLS] state (b, 1, d): what a Big Bird classification head reads."""
        return (model.bert(input_ids, attention_mask=attention_mask, return_dict=True).last_hidden_state[:, :1],)

    def head_logits(self, model, first_state):
        return model.classifier(first_state)


register_family(SparseLongformerFamily())
register_family(SparseBigBirdFamily())
