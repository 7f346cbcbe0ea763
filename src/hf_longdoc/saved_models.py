"""Load a saved model folder for the CLI (evaluate, export, push, attention-map, predict) without surprises: the
folder's `model_type` must be one Transformers or hf_longdoc knows (else Transformers would offer to run the folder's
own code in an interactive prompt, and then advise a `trust_remote_code` flag the CLI does not have: we never pass
it), and the weights must fit the config exactly (a config.json hand-edited to more layers would otherwise load with
random layers, which are then evaluated or served as if trained)."""

import json
import os

from .modeling.registry import FAMILIES


def saved_config(model_dir, argument):
    """config.json of `model_dir` as a dict, checked: a folder, a config.json that parses, a `model_type` that
    Transformers or hf_longdoc registers (`argument` names the flag in every message)."""
    from transformers.models.auto.configuration_auto import CONFIG_MAPPING  # ours registered: `.modeling` is imported

    path = os.path.join(model_dir, "config.json")
    if not os.path.isfile(path):
        raise ValueError(f"{argument} {model_dir!r} is not a saved model folder (it holds no config.json"
                         f"{'' if os.path.isdir(model_dir) else '; the folder does not exist'}); pass the --output-dir "
                         "of `hf-longdoc train` or a `save_pretrained` folder.")
    try:
        with open(path, encoding="utf-8") as f:
            config = json.load(f)
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as error:
        raise ValueError(f"{argument} {model_dir!r}: its config.json cannot be read ({error}).") from None
    model_type = config.get("model_type") if isinstance(config, dict) else None
    if model_type not in CONFIG_MAPPING:
        raise ValueError(f"{argument} {model_dir!r} holds a model of type {model_type!r}, which neither Transformers "
                         f"nor hf_longdoc knows (our families: {', '.join(FAMILIES)}); hf-longdoc never runs a "
                         "folder's own code. Pass a folder saved by `hf-longdoc train` or `save_pretrained` of a "
                         "Transformers model.")
    return config


def load_saved_model(model_dir, argument, model_class=None, **loading):
    """The model saved in `model_dir` (`model_class`: default AutoModelForSequenceClassification), in eval mode;
    `loading` goes to `from_pretrained` (e.g. `dtype`).

    A ValueError naming `argument` (the CLI flag) when the folder's model type is unknown (see `saved_config`) or
    when its weights do not fit its config: the first weight the config expects and the file lacks (or holds with
    another shape), and one the file holds and the config has no place for."""
    from transformers import AutoModelForSequenceClassification

    saved_config(model_dir, argument)
    model_class = model_class or AutoModelForSequenceClassification
    model, info = model_class.from_pretrained(model_dir, output_loading_info=True, ignore_mismatched_sizes=True,
                                              trust_remote_code=False, **loading)
    order = {name: i for i, name in enumerate(model.state_dict())}
    first = lambda names: min(names, key=lambda name: order.get(name, len(order)))  # noqa: E731
    fix = ("config.json does not describe these weights (was it edited?); restore the config the model was saved "
           "with, or save the model again")
    if info.get("mismatched_keys"):
        name, saved, built = min(info["mismatched_keys"], key=lambda item: order.get(item[0], len(order)))
        raise ValueError(f"{argument} {model_dir!r}: the weight {name!r} has shape {tuple(saved)} in the file but "
                         f"{tuple(built)} in the model its config.json builds ({len(info['mismatched_keys'])} weights "
                         f"differ); {fix}.")
    base = getattr(model, "base_model_prefix", "") + "."
    if info.get("missing_keys") and all(not name.startswith(base) for name in info["missing_keys"]):
        raise ValueError(f"{argument} {model_dir!r} holds a pretrained encoder without a trained classification head "
                         f"({', '.join(sorted(info['missing_keys'])[:3])} are not in it); train one around it first, "
                         "e.g. `hf-longdoc train --model segment_lm --backbone` with this folder.")
    if info.get("missing_keys"):
        raise ValueError(f"{argument} {model_dir!r}: the weight {first(info['missing_keys'])!r} of the model its "
                         f"config.json builds is not in the file ({len(info['missing_keys'])} missing); it would "
                         f"run with random values. {fix[0].upper() + fix[1:]}.")
    if info.get("unexpected_keys"):
        raise ValueError(f"{argument} {model_dir!r}: the file holds the weight "
                         f"{sorted(info['unexpected_keys'])[0]!r} ({len(info['unexpected_keys'])} in all), which "
                         f"the model its config.json builds has no place for; {fix}.")
    return model.eval()


def load_saved_tokenizer(model_dir, argument, fix="save the model's tokenizer there with `tokenizer.save_pretrained`"):
    """The tokenizer saved in `model_dir`: a ValueError naming `argument` and `fix` when the folder holds no tokenizer
    files (Transformers would build a vocabulary-less one, or ask to install sentencepiece) or no usable vocabulary
    (see `data.load_tokenizer`)."""
    from .data import load_tokenizer

    saved_config(model_dir, argument)
    return load_tokenizer(model_dir, argument, fix)


__all__ = ["load_saved_model", "load_saved_tokenizer", "saved_config"]
