"""The families and baselines by name, without importing their code: what `hf-longdoc --help` lists.

`--help` answers in well under a second because it imports neither torch, Transformers nor the model classes; the
names, variants and help lists it shows come from this table. Each family's registry entry
(`modeling/<family>/family.py`) reads its `evidence_weight` from here, and a test checks the rest of the table against
the registry (the variants' choices are the config classes' own constants, which the Hub copy of a model must hold
without importing this package).
"""

# the order is the registry's, and the CLI's listing
FAMILY_NAMES = ("contextualizer", "elementwise", "slstm", "sparse_longformer", "sparse_bigbird", "segment_lm")
# the families that start from a pretrained checkpoint (`--backbone`)
BACKBONE_FAMILIES = ("elementwise", "sparse_longformer", "sparse_bigbird", "segment_lm")
# the Transformers models `compare` and `bench` measure against, in `experiments.baselines.BASELINES`' order
BASELINE_NAMES = ("bert", "albert", "canine", "roberta", "longformer", "bigbird", "modernbert", "eurobert",
                  "nomicbert")
# auto: flash_attention_2 on a CUDA GPU in half precision when flash-attn is installed, else flex_attention for a
# model with a local window (ModernBERT) on a CUDA GPU, else sdpa (`baselines.baseline_attention`)
ATTENTION_IMPLEMENTATIONS = ("auto", "sdpa", "eager", "flash_attention_2", "flex_attention")
# `bert-N-headtail` reads the first HEAD_TOKENS and the last N - 2 - HEAD_TOKENS tokens: 128 + 382 at N = 512, the best
# truncation of Sun et al. (2019), "How to Fine-Tune BERT for Text Classification?", Section 5.3.1
# (https://arxiv.org/abs/1905.05583)
HEAD_TOKENS = 128
# `<kind>-N` reads at least MIN_TOKENS tokens ([CLS], text and [SEP]); `<kind>-N-headtail` at least the head, [CLS],
# [SEP] and one token of the tail
MIN_TOKENS = 8
GLOBAL_SELECTORS = ("cls", "first_n", "random", "tfidf", "pmi")
# family -> {config key: its choices}: `family:choice` names a variant
VARIANTS = {
    "contextualizer": {},
    "elementwise": {},
    "slstm": {},
    "sparse_longformer": {"global_selector": GLOBAL_SELECTORS,
                          "attention_backend": ("auto", "blocked", "flex", "longformer")},
    "sparse_bigbird": {"global_selector": GLOBAL_SELECTORS, "attention_type": ("block_sparse", "original_full")},
    "segment_lm": {"variant": ("base", "cat", "rnn", "att", "att_ablated")},
}
# family -> the settings that change how a saved model runs, not what it computes (`predict --config`)
RUNTIME_SETTINGS = {"slstm": ("compile_gates", "chunk_size"),
                    "sparse_longformer": ("attention_backend", "attention_checkpointing")}
CONTEXT_EVIDENCE_WINDOW = 32  # the Contextualizer's evidence: windows of this many tokens
# family -> what the weight of a passage `predict --explain` returns means (the families whose weights say)
EVIDENCE_WEIGHTS = {
    "contextualizer": (f"a window of {CONTEXT_EVIDENCE_WINDOW} tokens' share of the updates of the context vector "
                       "(||α ⊙ x|| of Eq. 6, averaged over the steps); a document's weights sum to 1"),
    "sparse_longformer": ("the score the selector chose the word's global token by (TF-IDF: tf·idf of the token; "
                          "PMI: the PMI of its pairs), computed before the model reads the document: it says which "
                          "words every position attends to, not how much each moved this label"),
    "segment_lm": ("a segment's attention weight α (Eq. 4), the share of the segment in the document vector the "
                   "classifier reads; the weights of the segments read sum to 1 (the `base` variant reads segment 1, "
                   "or the head + tail window, alone: weight 1)"),
}


def selector_families():
    """{family: its global-token selectors} of the families whose models choose global tokens: the models an
    attention map is drawn for."""
    return {name: variants["global_selector"] for name, variants in VARIANTS.items() if "global_selector" in variants}


__all__ = [
    "ATTENTION_IMPLEMENTATIONS", "BACKBONE_FAMILIES", "BASELINE_NAMES", "CONTEXT_EVIDENCE_WINDOW",
    "EVIDENCE_WEIGHTS", "FAMILY_NAMES", "GLOBAL_SELECTORS", "HEAD_TOKENS", "MIN_TOKENS", "RUNTIME_SETTINGS",
    "VARIANTS", "selector_families"
]
