"""The contextualizer's registry entry: its classes, paper and training defaults.

Not part of a saved model's remote code (only the configuration and modeling files are): the package reads it, the
Hub never does.
"""

import torch

from ...utils.catalog import CONTEXT_EVIDENCE_WINDOW, EVIDENCE_WEIGHTS
from ..registry import Family, register_family
from .configuration_contextualizer import ContextualizerConfig
from .modeling_contextualizer import ContextualizerForSequenceClassification, ContextualizerModel

# tokens per passage an explanation cuts a document into: about a sentence (the Contextualizer reads no sentences of
# its own, and its α weighs single tokens, too small to be read as evidence alone)
EVIDENCE_WINDOW = CONTEXT_EVIDENCE_WINDOW


def token_contributions(model, outputs, input_ids, attention_mask):
    """(b, n): how much each token contributed to the context updates, ||α_i(k) ⊙ x_i|| (the size of its term of
    Eq. 6) averaged over the K steps, from the α(k) the forward returned (`outputs.attentions`); 0 at pads."""
    mask = attention_mask.bool()
    x_hat = model.base_model.embeddings(input_ids, None, mask).float()  # (b, n, m) = n·x, Eq. 1-2
    n_real = mask.sum(dim=1)[:, None].float()  # (b, 1)
    terms = [(alpha.float() * x_hat).norm(dim=-1) / n_real for alpha in outputs.attentions]  # K × (b, n)
    return (torch.stack(terms).mean(dim=0) * mask).cpu()


class ContextualizerFamily(Family):
    """The Contextualizer: no maximum length, and evidence from its α (`token_contributions`)."""

    name = "contextualizer"
    config_class = ContextualizerConfig
    model_class = ContextualizerModel
    heads = {"AutoModelForSequenceClassification": ContextualizerForSequenceClassification}
    paper_title = "Contextualizer: Connecting the Dots of Context with Second-Order Attention"
    paper_citation = (
        "@article{maupome2022contextualizer,\n"
        "  title={Contextualizer: Connecting the Dots of Context with Second-Order Attention},\n"
        "  author={Maupom{\\'e}, Diego and Meurs, Marie-Jean},\n"
        "  journal={Information},\n  volume={13},\n  number={6},\n  pages={290},\n  year={2022},\n"
        "  doi={10.3390/info13060290}\n}"
    )
    summary = (
        "A linear-time encoder: tokens are embedded with a softmax-over-positions encoding, then K steps of "
        "rank-u second-order (vector) attention refine a single context vector c; the final c(K) is the "
        "document representation. No maximum length."
    )
    train_size = {"hidden_size": 128, "num_layers": 3, "num_heads": 1, "max_length": 4096}  # rank u = 2m = 256
    card_settings = ("hidden_size", "rank", "num_hidden_layers", "vocab_size", "default_context")
    card_limits = ("The architecture has no maximum length; the saved model reads the length it was trained at "
                   "(`max_input_length` in config.json), cutting a longer input as the tokenizer's `truncation=True` "
                   "does.")
    evidence_weight = EVIDENCE_WEIGHTS["contextualizer"]

    def evidence(self, model, outputs, input_ids, attention_mask):
        """Windows of `EVIDENCE_WINDOW` tokens, each weighed by its share of the document's contributions
        (`token_contributions`): the weights of a document sum to 1."""
        contributions = token_contributions(model, outputs, input_ids, attention_mask)
        passages = []
        for row, weights in enumerate(contributions):
            real = attention_mask[row].nonzero().flatten().tolist()  # the real positions, in order (pads either side)
            total = float(weights.sum()) or 1.0
            windows = [real[start:start + EVIDENCE_WINDOW] for start in range(0, len(real), EVIDENCE_WINDOW)]
            passages.append([(window[0], window[-1] + 1, float(weights[window].sum()) / total) for window in windows])
        return passages


register_family(ContextualizerFamily())
