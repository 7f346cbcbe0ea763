"""The baselines by name and the attention implementations they run, without importing Transformers.

`hf-longdoc bench --help` lists them, and answers at once only if it imports neither torch nor Transformers.
`baselines.BASELINES` holds one entry per name, in this order, and a test checks that the two agree.
"""

BASELINE_NAMES = ("bert", "albert", "canine", "roberta", "longformer", "bigbird", "modernbert", "eurobert",
                  "nomicbert")
# auto: flash_attention_2 on a CUDA GPU in half precision when flash-attn is installed, else flex_attention for a
# model with a local window (ModernBERT) on a CUDA GPU, else sdpa (`baselines.baseline_attention`)
ATTENTION_IMPLEMENTATIONS = ("auto", "sdpa", "eager", "flash_attention_2", "flex_attention")

__all__ = ["ATTENTION_IMPLEMENTATIONS", "BASELINE_NAMES"]
