"""A tiny random BERT checkpoint saved with its tokenizer: what tests load as a "pretrained" backbone (nothing is
downloaded)."""

import torch
from transformers import BertConfig, BertForSequenceClassification, BertModel


def save_tiny_bert(folder, tokenizer, max_positions):
    """Save a seeded BertModel (width 32, one layer, 4 heads, intermediate 37: sizes that divide nothing by accident)
    for `tokenizer`'s vocabulary with `max_positions` positions, and the tokenizer, into `folder`; returns it as str."""
    torch.manual_seed(0)
    config = BertConfig(vocab_size=len(tokenizer), hidden_size=32, num_hidden_layers=1, num_attention_heads=4,
                        intermediate_size=37, max_position_embeddings=max_positions,
                        pad_token_id=tokenizer.pad_token_id)
    BertModel(config).save_pretrained(folder)
    tokenizer.save_pretrained(folder)
    return str(folder)


def save_tiny_bert_classifier(folder, tokenizer, labels, max_positions):
    """Save a seeded random BertForSequenceClassification of `labels` (width 16, one layer, 2 heads, intermediate 17)
    for `tokenizer`'s vocabulary with `max_positions` positions, and the tokenizer, into `folder`; returns it as str."""
    torch.manual_seed(0)
    config = BertConfig(vocab_size=len(tokenizer), hidden_size=16, num_hidden_layers=1, num_attention_heads=2,
                        intermediate_size=17, max_position_embeddings=max_positions,
                        pad_token_id=tokenizer.pad_token_id, num_labels=len(labels), id2label=dict(enumerate(labels)),
                        label2id={name: index for index, name in enumerate(labels)})
    BertForSequenceClassification(config).save_pretrained(folder)
    tokenizer.save_pretrained(folder)
    return str(folder)
