"""The S-LSTM's registry entry: its classes, paper, training defaults and the profile of its recurrent step.

Not part of a saved model's remote code (only the configuration and modeling files are): the package reads it, the
Hub never does.
"""

import torch

from ..registry import Family, register_family
from .configuration_slstm import SLSTMConfig
from .modeling_slstm import SLSTMForMaskedLM, SLSTMForSequenceClassification, SLSTMModel, chunk_sizes


class SLSTMFamily(Family):
    """The S-LSTM: positions up to `max_position_embeddings`, and a recurrent step `bench` profiles."""

    name = "slstm"
    config_class = SLSTMConfig
    model_class = SLSTMModel
    heads = {"AutoModelForSequenceClassification": SLSTMForSequenceClassification,
             "AutoModelForMaskedLM": SLSTMForMaskedLM}
    paper_title = "Pre-Training a Graph Recurrent Network for Language Representation"
    paper_citation = (
        "@article{wang2022slstm,\n"
        "  title={Pre-Training a Graph Recurrent Network for Language Representation},\n"
        "  author={Wang, Yile and Yang, Linyi and Teng, Zhiyang and Zhou, Ming and Zhang, Yue},\n"
        "  journal={arXiv preprint arXiv:2209.03834},\n  year={2022}\n}"
    )
    summary = (
        "A graph recurrent encoder (S-LSTM): every token is a node linked to its neighbours and to one sentence "
        "node; L synchronous LSTM-style updates with shared parameters exchange information locally and through "
        "the sentence node, in time linear in the length. The final sentence node is the document vector."
    )
    train_size = {"hidden_size": 128, "num_layers": 4, "num_heads": 1, "max_length": 4096}  # L = 4 steps
    learning_rate = 1e-3
    card_settings = ("hidden_size", "num_recurrent_steps", "window_size", "vocab_size", "max_position_embeddings")
    runtime_settings = ("compile_gates", "chunk_size")
    concurrent_inference = False  # its steps may run through torch.compile, whose caches are not for several threads

    def reading_length(self, config):
        return config.max_position_embeddings

    def profile(self, model, batch_size, length):
        """One S-LSTM recurrent step on random states, and `torch.matmul`s of the shapes its FLOPs are counted as: ξ
        (b·n, 3H) @ (3H, 7H) for the token gates and h (b·n, H) @ (H, H) for the sentence node's token forget gate,
        i.e. 2 · 22·H² per token for window 1. Everything else a step does (gate LayerNorms, sigmoids, softmaxes, cell
        updates, the sentence node) is overhead."""
        device, config = model.device, model.config
        H, tokens = config.hidden_size, batch_size * length
        h = torch.randn(batch_size, length, H, device=device)
        c, g, c_g = torch.randn_like(h), h.mean(dim=1), h.mean(dim=1)
        mask = torch.ones(batch_size, length, dtype=torch.bool, device=device)
        x_term = torch.randn(batch_size, length, 7 * H, device=device)
        sizes = chunk_sizes(length, config.chunk_size, config.window_size)
        xi, w_gates = torch.randn(tokens, 3 * H, device=device), torch.randn(3 * H, 7 * H, device=device)
        h_flat, w_forget = torch.randn(tokens, H, device=device), torch.randn(H, H, device=device)
        return {"name": "recurrent step", "flops": 2 * 22 * H * H * tokens,
                "run": lambda: model.step(h, c, g, c_g, x_term, mask, sizes),
                "matmuls": lambda: (torch.matmul(xi, w_gates), torch.matmul(h_flat, w_forget))}


register_family(SLSTMFamily())
