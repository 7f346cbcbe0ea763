"""A family built around a pretrained backbone in one call, as `train` builds it in three steps (`check_backbone`
while resolving its settings, `recipe.wrap_backbone`, then the tokenizer's length from `reading_length`): what tests
build their backbone models with."""

import os

from hf_longdoc.inference.reading import reading_length
from hf_longdoc.modeling import Family, get_family
from hf_longdoc.training.recipe import wrap_backbone
from hf_longdoc.training.settings import check_backbone


def build_from_backbone(family, backbone, label_names, multi_label, config_overrides=None, max_length=4096,
                        tokenizer=None):
    """(model, tokenizer): `family` (a `Family` or its name) around the pretrained `backbone` (a folder or Hub id;
    the family's registry `from_backbone`), reading up to `max_length` input ids (None: as many as the model can),
    with a new classification head for the labels. The tokenizer is `tokenizer` when given, else the backbone's own
    (or the family's, for the elementwise bytes), with `model_max_length` set to what the model really reads
    (`reading_length`). The backbone is checked first (`check_backbone`)."""
    family = family if isinstance(family, Family) else get_family(family)
    backbone = os.fspath(backbone) if isinstance(backbone, os.PathLike) else backbone  # a pathlib.Path too
    check_backbone(family, backbone)
    model, tokenizer = wrap_backbone(family, backbone, label_names, multi_label, config_overrides, max_length,
                                     tokenizer)
    length = reading_length(model.config, max_length)
    if length is not None:
        tokenizer.model_max_length = length
    return model, tokenizer
