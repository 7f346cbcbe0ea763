"""What the package reads from a pretrained Transformers checkpoint, shared by the families' registry entries and the
pipeline: how many positions it reads, and the pooling a sentence-transformers checkpoint was trained with.

Package-side, outside every family folder, so that no family imports another. The families' shipped files (Hub rule:
self-contained) keep copies marked `# Copied from hf_longdoc.modeling.backbones.<name>`, which
`tests/test_copies.py` holds to these originals.
"""

import json

from transformers.utils import cached_file, logging

logger = logging.get_logger(__name__)

# a sentence-transformers Pooling module's modes -> the pooling (`segment_pooling`, `classifier_pooling`) that computes
# the same vector
SENTENCE_TRANSFORMERS_POOLINGS = {"pooling_mode_cls_token": "cls", "pooling_mode_mean_tokens": "mean",
                                  "pooling_mode_lasttoken": "last"}


def backbone_positions(backbone_config):
    """How many positions the backbone reads (None: no table): its `max_position_embeddings` (GPT-2:
    `n_positions`), less the pad id + 1 rows a RoBERTa-numbered encoder (RoBERTa, XLM-R, CamemBERT, MPNet) reserves;
    reading more would index past its table."""
    # encoders that number a token's position after the pad id (RoBERTa's `create_position_ids_from_input_ids`)
    pad_numbered = ("roberta", "xlm-roberta", "xlm-roberta-xl", "camembert", "mpnet", "longformer",
                    "roberta-prelayernorm", "data2vec-text", "xmod")
    positions = getattr(backbone_config, "max_position_embeddings", None) or getattr(backbone_config, "n_positions",
                                                                                      None)
    if positions is not None and backbone_config.model_type in pad_numbered:
        pad = 1 if backbone_config.model_type == "mpnet" else backbone_config.pad_token_id or 0  # MPNet fixes it at 1
        positions -= pad + 1
    return positions


def sentence_transformers_file(path_or_id, filename):
    """The JSON of `filename` in a checkpoint (a folder or Hub id), or None when it has none."""
    found = cached_file(path_or_id, filename, _raise_exceptions_for_missing_entries=False,
                        _raise_exceptions_for_connection_errors=False)
    if found is None:
        return None
    with open(found, encoding="utf-8") as file:
        return json.load(file)


def declared_pooling(path_or_id):
    """The `segment_pooling` a sentence-transformers checkpoint was trained to embed text with (the Pooling module
    named in its modules.json; the sparse Longformer's family reads it too), or None when it declares none, or one
    this model lacks (max, weighted mean, several modes at once: logged)."""
    modules = sentence_transformers_file(path_or_id, "modules.json") or []
    folders = [module.get("path", "") for module in modules if str(module.get("type", "")).endswith(".Pooling")]
    settings = sentence_transformers_file(path_or_id, f"{folders[0]}/config.json") if folders and folders[0] else None
    if not settings:
        return None
    modes = sorted(key for key, value in settings.items() if key.startswith("pooling_mode_") and value is True)
    if len(modes) == 1 and modes[0] in SENTENCE_TRANSFORMERS_POOLINGS:
        return SENTENCE_TRANSFORMERS_POOLINGS[modes[0]]
    logger.warning(f"{path_or_id} embeds text with {modes}, which hf_longdoc cannot compute; the model reads [CLS] "
                   "instead (the paper's). Set `segment_pooling` (segment LM) or `classifier_pooling` (sparse "
                   "Longformer) to choose.")
    return None


__all__ = ["backbone_positions", "declared_pooling", "sentence_transformers_file"]
