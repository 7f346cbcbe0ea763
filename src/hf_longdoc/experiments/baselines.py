"""The baselines every method is measured against: Transformers' BERT, RoBERTa, ALBERT, CANINE, Longformer, Big Bird,
the native long encoders ModernBERT, EuroBERT and NomicBERT, and TF-IDF + LR.

The Transformers models are built at a given size; the TF-IDF + logistic-regression reader reads the first 512 words
or the whole text. `bert-N`, `albert-N` and `canine-N` are the elementwise paper's ORIG models (Tables 2-4): the
same Transformer with its own tokenization (subwords; CANINE: Unicode characters), reading the first N tokens.
"""

import re
from dataclasses import dataclass
from typing import NamedTuple

import numpy as np
import torch
from transformers import (
    AlbertConfig,
    AlbertForSequenceClassification,
    BertConfig,
    BertForSequenceClassification,
    BigBirdConfig,
    BigBirdForSequenceClassification,
    CanineConfig,
    CanineForSequenceClassification,
    CanineTokenizer,
    EuroBertConfig,
    EuroBertForSequenceClassification,
    LongformerConfig,
    LongformerForSequenceClassification,
    ModernBertConfig,
    ModernBertForSequenceClassification,
    NomicBertConfig,
    NomicBertForSequenceClassification,
    RobertaConfig,
    RobertaForSequenceClassification,
)
from transformers.modeling_outputs import SequenceClassifierOutput

from ..modeling.segment_lm.modeling_segment import cut_into_segments
from ..training.feasibility import SquareTensors
from ..utils.catalog import ATTENTION_IMPLEMENTATIONS, HEAD_TOKENS, MIN_TOKENS


@dataclass(frozen=True)
class Baseline:
    config_class: type
    model_class: type
    position_offset: int = 0  # RoBERTa-style position ids start after the pad id: 2 more positions
    sparse: bool = False  # window attention with global tokens (its time and memory are the sparse models' reference)
    window_key: str | None = None  # the config setting the attention window goes to
    truncating: bool = False  # `name-N` reads the first N tokens
    own_tokenizer: object = None  # max_length -> its tokenizer; None: the task's (WordPiece, or the backbone's)
    sizes: object = None  # (hidden_size) -> extra config sizes
    dropout_key: str = "attention_probs_dropout_prob"  # the config setting of the attention-probability dropout
    memory_reference: bool = False  # a long model: `bench` reports every model's peak memory against it too
    in_compare: bool = True  # `compare` offers it (RoBERTa is BERT with other position ids: `bench` measures it)
    # with `compare --backbone`, `name-N` is the pretrained checkpoint itself reading N tokens (else trained from
    # scratch only)
    from_checkpoint: bool = False
    # some layers attend within a local window only: on a CUDA GPU FlexAttention skips the blocks outside it, where
    # SDPA computes them all under a mask (`baseline_attention`'s auto)
    local_window: bool = False
    # (attention, batch, heads, bytes per element) -> (shared, per-layer) bytes per length² of the (n x n) tensors its
    # forward builds (`feasibility.SquareTensors`); None: `dense_scores`, eager attention's scores alone
    square_bytes: object = None
    square_what: str = ""  # the (n x n) tensor it builds besides eager scores, in words


# The (n x n) tensors of the baselines' forward passes, measured with Transformers 5.24 on the CPU (the largest tensor
# one pass allocates, at 1,024 to 4,096 ids, batches 1 and 2, float32 and bfloat16):
# - eager attention (BERT, RoBERTa, ALBERT, CANINE, EuroBERT, NomicBERT): the scores, (batch x heads x n x n) in the
#   model's dtype, in every layer; SDPA builds none of them there (PyTorch's fused CPU kernel; with all-ones masks),
#   nor FlashAttention 2 or FlexAttention;
# - Longformer: whatever the attention, a (batch x 1 x n x n) mask in the model's dtype, once per pass (its sliding
#   window is linear, the mask is not: 8.2 TiB at 3,000,000 ids);
# - Big Bird: (batch x heads x n x n) probabilities in the model's dtype, block-sparse attention included;
# - ModernBERT: with SDPA or eager attention, its sliding-window mask as (n x n) int64 position differences, once.
def dense_scores(attention, batch_size, heads, element_bytes):
    """Eager attention's (batch x heads x n x n) scores in every layer; none with SDPA, FlashAttention or Flex."""
    return 0, batch_size * heads * element_bytes if attention == "eager" else 0


def longformer_mask(attention, batch_size, heads, element_bytes):
    return batch_size * element_bytes, 0


def bigbird_probabilities(attention, batch_size, heads, element_bytes):
    return batch_size * heads * element_bytes, 0


def modernbert_masks(attention, batch_size, heads, element_bytes):
    shared, per_layer = dense_scores(attention, batch_size, heads, element_bytes)
    return shared + (8 if attention in ("sdpa", "eager") else 0), per_layer


BASELINES = {
    "bert": Baseline(BertConfig, BertForSequenceClassification, truncating=True, from_checkpoint=True),
    # ALBERT factorises its embeddings: E = 128 (the paper's ALBERT_ORIG), at most the width
    "albert": Baseline(AlbertConfig, AlbertForSequenceClassification, truncating=True,
                       sizes=lambda hidden_size: {"embedding_size": min(128, hidden_size)}),
    # CANINE reads Unicode code points (its tokenizer needs no vocabulary) and downsamples them 4x
    "canine": Baseline(CanineConfig, CanineForSequenceClassification, truncating=True,
                       own_tokenizer=lambda max_length: CanineTokenizer(model_max_length=max_length)),
    "roberta": Baseline(RobertaConfig, RobertaForSequenceClassification, position_offset=2, in_compare=False),
    "longformer": Baseline(LongformerConfig, LongformerForSequenceClassification, position_offset=2, sparse=True,
                           window_key="attention_window", square_bytes=longformer_mask,
                           square_what="its (batch x n x n) attention mask"),
    # block-sparse attention: blocks of 64, 3 random blocks (Transformers' defaults, the thesis' bigbird-roberta-base)
    "bigbird": Baseline(BigBirdConfig, BigBirdForSequenceClassification, sparse=True,
                        square_bytes=bigbird_probabilities,
                        square_what="its (batch x heads x n x n) attention probabilities"),
    # a native long encoder (Warner et al., 2024, https://arxiv.org/abs/2412.13663): RoPE, a GLU feed-forward,
    # layers alternating a 128-token local window and global attention (every third global), 8,192 positions; its
    # own long settings are kept (`local_attention`, `layer_types`), only the size follows the bench
    "modernbert": Baseline(ModernBertConfig, ModernBertForSequenceClassification, dropout_key="attention_dropout",
                           # its special ids default to its 50k vocabulary: the task's [CLS]
                           memory_reference=True, local_window=True, square_bytes=modernbert_masks,
                           square_what="its sliding-window mask (n x n int64)",
                           sizes=lambda hidden_size: {"pad_token_id": 0, "bos_token_id": 1, "eos_token_id": 2,
                                                      "cls_token_id": 1, "sep_token_id": 2}),
    # native long encoders with global attention in every layer, RoPE and a SwiGLU feed-forward: EuroBERT (Boizard et
    # al., 2025, https://arxiv.org/abs/2503.05500; 8,192 positions) and NomicBERT (Nussbaum et al., 2024,
    # https://arxiv.org/abs/2402.01613; trained at 2,048, read at 8,192 by its RoPE). Their special ids default to
    # their own vocabularies: the task's are set
    "eurobert": Baseline(EuroBertConfig, EuroBertForSequenceClassification, dropout_key="attention_dropout",
                         sizes=lambda hidden_size: {"pad_token_id": 0, "bos_token_id": 1, "eos_token_id": 2,
                                                    "mask_token_id": 3}),
    "nomicbert": Baseline(NomicBertConfig, NomicBertForSequenceClassification),
}


# The recipe of the baselines that fine-tune the `--backbone` checkpoint itself in `compare` (`bert-N`,
# `bert-N-headtail`, `native`, `bert-chunks`) unless --learning-rate / --head-learning-rate are given: the checkpoint's
# own weights at 2e-5 (BERT's fine-tuning rate: Devlin et al. 2019; Sun et al. 2019, https://arxiv.org/abs/1905.05583,
# Section 5.2) after the 10% warm-up, its new classification head at 1e-3 (the per-group rates of `HeadRateTrainer`).
# One rate of 1e-4 for both collapsed runs to one class: MiniLM on 800 reviews in fp16, `bert-512-headtail` .500 on
# seed 42 and .869 on 43, `bert-chunks` .738 and .500. A small rate with warm-up is the remedy for such failed
# fine-tuning runs (Mosbach et al., "On the Stability of Fine-tuning BERT", ICLR 2021,
# https://arxiv.org/abs/2006.04884); the fast head lets a random head learn within the few epochs while the pretrained
# body moves little, as the long models' head stage does.
CHECKPOINT_RATE, CHECKPOINT_HEAD_RATE = 2e-5, 1e-3

# HEAD_TOKENS, MIN_TOKENS: in the catalog, which `compare --help` reads without importing this module


def fewest_tokens(reading=""):
    """The smallest N of `<kind>-N` (`reading` "") or `<kind>-N-headtail` ("headtail")."""
    return HEAD_TOKENS + 3 if reading == "headtail" else MIN_TOKENS


def too_few_tokens(name):
    """A sentence naming the limit when `name` has the form `<kind>-N` or `<kind>-N-headtail` of a truncating kind
    with N below it (`bert-2`); else None."""
    kind, _, rest = name.partition("-")
    tokens, _, reading = rest.partition("-")
    baseline = BASELINES.get(kind)
    if baseline is None or not baseline.truncating or not tokens.isdigit() or reading not in ("", "headtail"):
        return None
    if int(tokens) >= fewest_tokens(reading):
        return None
    return (f"{name!r} reads {int(tokens)} tokens, and N of `{kind}-N{'-' + reading if reading else ''}` must be at "
            f"least {fewest_tokens(reading)}" + (f" (the first {HEAD_TOKENS}, [CLS], [SEP] and one from the end)"
                                                 if reading else " ([CLS], some text and [SEP])")
            + f"; use e.g. {kind}-{max(512, fewest_tokens(reading))}{'-' + reading if reading else ''}.")


class BaselineName(NamedTuple):
    kind: str  # a key of BASELINES
    tokens: int | None  # bert-N / albert-N / canine-N: tokens read
    head: int | None = None  # bert-N-headtail: tokens kept from the start (the rest from the end)


def parse_baseline(name):
    """`bert`, `roberta`, `albert`, `canine`, `longformer`, `bigbird`, `<kind>-<N>` (bert, albert or canine reading the
    first N tokens) or `<kind>-<N>-headtail` (the first 128 and the last N - 130 tokens) -> `BaselineName`, or None
    when `name` is not a baseline."""
    kind, dash, rest = name.partition("-")
    tokens, _, reading = rest.partition("-")
    if kind not in BASELINES or reading not in ("", "headtail"):
        return None
    if dash and not (BASELINES[kind].truncating and tokens.isdigit() and int(tokens) >= fewest_tokens(reading)):
        return None
    return BaselineName(kind, int(tokens) if dash else None, HEAD_TOKENS if reading else None)


def baseline_config(name, hidden_size, num_layers, num_heads, max_length, attention_window=512,
                    attention_dropout=None, **settings):
    """The config of Transformers' `name` model (a key of `BASELINES`) at that width, depth and heads, intermediate
    4·h, positions for `max_length` tokens; `attention_window` for the Longformer, `attention_dropout` the
    attention-probability dropout, `settings` any other config value (vocab, labels, ids)."""
    baseline = BASELINES[name]
    sizes = dict(hidden_size=hidden_size, num_hidden_layers=num_layers, num_attention_heads=num_heads,
                 intermediate_size=4 * hidden_size, max_position_embeddings=max_length + baseline.position_offset)
    if baseline.sizes is not None:
        sizes.update(baseline.sizes(hidden_size))
    if baseline.window_key:
        sizes[baseline.window_key] = attention_window
    if attention_dropout is not None:
        sizes[baseline.dropout_key] = attention_dropout
    return baseline.config_class(**{**sizes, **settings})


def build_baseline(name, *sizes, **settings):
    """Transformers' `name` model for sequence classification, of the `baseline_config` the arguments give."""
    return BASELINES[name].model_class(baseline_config(name, *sizes, **settings))


SUPPORT_FLAGS = {"sdpa": "_supports_sdpa", "flash_attention_2": "_supports_flash_attn",
                 "flex_attention": "_supports_flex_attn"}


def flash_attention_can_run(device, dtype):
    """Whether FlashAttention 2 can run here: the flash-attn package, a CUDA device and float16 or bfloat16."""
    from transformers.utils import is_flash_attn_2_available

    return torch.device(device).type == "cuda" and dtype in (torch.float16, torch.bfloat16) and \
        is_flash_attn_2_available()


def check_attention(requested, device="cpu", dtype=torch.float32):
    """`requested` (one of ATTENTION_IMPLEMENTATIONS), or a ValueError naming the fix, before any model is built:
    FlashAttention 2 runs only from the flash-attn package, on a CUDA GPU, in float16 or bfloat16."""
    if requested not in ATTENTION_IMPLEMENTATIONS:
        raise ValueError(f"`attention` (--attention) must be one of {', '.join(ATTENTION_IMPLEMENTATIONS)}, got "
                         f"{requested!r}.")
    if requested == "flash_attention_2" and not flash_attention_can_run(device, dtype):
        from transformers.utils import is_flash_attn_2_available

        if not is_flash_attn_2_available():
            raise ValueError("`attention` (--attention) flash_attention_2 needs the flash-attn package and a CUDA GPU; "
                             "install it (pip install flash-attn) or use --attention sdpa.")
        raise ValueError("`attention` (--attention) flash_attention_2 runs on a CUDA GPU in half precision; add "
                         "--device cuda --dtype bfloat16 (or float16), or use --attention sdpa.")
    return requested


def baseline_attention(name, requested="auto", device="cpu", dtype=torch.float32):
    """The attention implementation the baseline `name` runs with: `requested` where its model supports it, else its
    own (eager: Longformer, Big Bird). `auto`: FlashAttention 2 on a CUDA GPU in half precision when flash-attn is
    installed; else, for a model with local-window layers (ModernBERT) on a CUDA GPU, FlexAttention, which skips
    the blocks outside the window (compiled on first use); else PyTorch's SDPA (on CPU a masked n x n product, so
    ModernBERT's 128-token window costs full attention there), else eager."""
    model_class = BASELINES[name].model_class
    supported = [kind for kind, flag in SUPPORT_FLAGS.items() if getattr(model_class, flag, False)]
    if requested == "auto":
        if "flash_attention_2" in supported and flash_attention_can_run(device, dtype):
            return "flash_attention_2"
        if BASELINES[name].local_window and "flex_attention" in supported and torch.device(device).type == "cuda":
            return "flex_attention"
        return "sdpa" if "sdpa" in supported else "eager"
    return requested if requested in supported or requested == "eager" else "eager"


def square_tensors(name, attention, batch_size, heads, element_bytes):
    """The `SquareTensors` the baseline `name` builds running `attention` (as `baseline_attention` resolved it), for
    the memory check before any work, with what they are and the fix in words."""
    baseline = BASELINES[name]
    shared, per_layer = (baseline.square_bytes or dense_scores)(attention, batch_size, heads, element_bytes)
    parts = (["eager attention's scores (batch x heads x n x n, every layer)"] if per_layer else []) + \
        ([baseline.square_what] if shared else [])
    supported = [kind for kind, flag in SUPPORT_FLAGS.items() if getattr(baseline.model_class, flag, False)]
    if shared and "flex_attention" in supported and baseline.local_window:
        fix = "pass --attention flex_attention on a CUDA GPU (no n x n mask), or lower {flags}"
    elif shared:
        fix = (f"lower {{flags}} ({name} builds it with every attention it supports; the sparse_longformer family "
               "reads long documents without n x n tensors)")
    elif "sdpa" in supported:
        fix = "pass --attention sdpa (or auto), which builds no n x n scores, or lower {flags}"
    else:
        fix = f"lower {{flags}} ({name} supports only eager attention)"
    return SquareTensors(shared, per_layer, " and ".join(parts), fix)


def baseline_tokenizer(name, max_length, default):
    """The tokenizer the baseline `name` reads: its own (CANINE: characters), else `default`."""
    own = BASELINES[name].own_tokenizer
    return own(max_length) if own is not None else default


TOKEN_PATTERN = r"(?u)\b\w+\b"


def tfidf_classifier(train_texts, train_labels, multi_label=False):
    """TF-IDF (sublinear tf, words seen in 2+ documents) + logistic regression fitted on the texts: a bag of words
    that reads every word of every document. Returns the fitted scikit-learn pipeline."""
    from sklearn.feature_extraction.text import TfidfVectorizer
    from sklearn.linear_model import LogisticRegression
    from sklearn.multiclass import OneVsRestClassifier
    from sklearn.pipeline import make_pipeline

    classifier = LogisticRegression(max_iter=2000, C=10.0)
    pipeline = make_pipeline(TfidfVectorizer(token_pattern=TOKEN_PATTERN, sublinear_tf=True, min_df=2),
                             OneVsRestClassifier(classifier) if multi_label else classifier)
    return pipeline.fit(list(train_texts), np.asarray(train_labels))


def truncating_baseline(data, multi_label=False, max_tokens=512, tokenizer=None):
    """TF-IDF + logistic regression on the first `max_tokens` word tokens of each document, and on the full text.

    This is the "reads only the first 512 tokens" reference of the built-in task; returns test accuracies (or micro-F1
    for multi-label data) for both readings. With a fast `tokenizer`, the first `max_tokens` of its tokens (without
    special tokens) instead of word tokens: what a 512-token model with that tokenizer reads, which is less text when
    it cuts words into pieces.
    """
    from sklearn.metrics import accuracy_score, f1_score

    def first_tokens(text):
        if tokenizer is not None:
            offsets = tokenizer(text, add_special_tokens=False, truncation=True, max_length=max_tokens,
                                return_offsets_mapping=True)["offset_mapping"]
            return text[:offsets[-1][1]] if offsets else ""
        return " ".join(re.findall(TOKEN_PATTERN, text)[:max_tokens])

    scores = {}
    for name, view in (("first_512", first_tokens), ("full_text", lambda text: text)):
        classifier = tfidf_classifier([view(t) for t in data["train"]["text"]], data["train"]["label"], multi_label)
        predicted = classifier.predict([view(t) for t in data["test"]["text"]])
        y_test = np.asarray(data["test"]["label"])
        scores[name] = float(f1_score(y_test, predicted, average="micro") if multi_label
                             else accuracy_score(y_test, predicted))
    return scores


class ChunkMeanClassifier(torch.nn.Module):
    """`bert-chunks`: a pretrained sequence classifier over every chunk of a document, its logits averaged over the
    chunks the document has; the literature's simplest long baseline. The document's tokens are cut into `num_chunks`
    chunks of `chunk_length` - 2 tokens, each read as [CLS] chunk [SEP] (the segment LM's cutting), and every chunk is
    trained through (no stop-gradient)."""

    def __init__(self, classifier, num_chunks, chunk_length, cls_token_id, sep_token_id, pad_token_id):
        super().__init__()
        self.classifier, self.config = classifier, classifier.config
        self.num_chunks, self.chunk_length = num_chunks, chunk_length
        self.ids = (cls_token_id, sep_token_id, pad_token_id)
        self.base_model_prefix = f"classifier.{classifier.base_model_prefix}"  # its new head: `classifier.classifier`

    @property
    def device(self):
        return self.classifier.device

    def forward(self, input_ids, attention_mask=None, labels=None, token_type_ids=None):
        attention_mask = torch.ones_like(input_ids) if attention_mask is None else attention_mask
        chunks, mask, present = cut_into_segments(input_ids, attention_mask, self.num_chunks, self.chunk_length,
                                                  *self.ids)  # (b, k, L), (b, k, L), (b, k)
        b, k, length = chunks.shape
        read = present.view(-1)
        logits = self.classifier(input_ids=chunks.view(b * k, length)[read],
                                 attention_mask=mask.view(b * k, length)[read].long()).logits  # (present chunks, c)
        per_chunk = logits.new_zeros(b * k, logits.shape[-1]).index_put((read.nonzero().flatten(),), logits)
        weights = present.to(logits.dtype)[..., None]  # (b, k, 1)
        mean = (per_chunk.view(b, k, -1) * weights).sum(dim=1) / weights.sum(dim=1)  # (b, c)
        loss = None
        if labels is not None:
            loss = self.classifier.loss_function(labels=labels, pooled_logits=mean, config=self.config)
        return SequenceClassifierOutput(loss=loss, logits=mean)
