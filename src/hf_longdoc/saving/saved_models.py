"""Load a saved model folder for the CLI (evaluate, export, push, attention-map, predict) without surprises: the
folder's `model_type` must be one Transformers or hf_longdoc knows (else Transformers would offer to run the folder's
own code in an interactive prompt, and then advise a `trust_remote_code` flag the CLI does not have: we never pass
it), and the weights must fit the config exactly (a config.json hand-edited to more layers would otherwise load with
random layers, which are then evaluated or served as if trained)."""

import fnmatch
import json
import os

from ..modeling.registry import FAMILIES

# Weight files `from_pretrained` reads with `torch.load` (unpickling, which can run code) when a folder holds no
# safetensors; and the safetensors files it reads instead
PICKLED_WEIGHTS = ("pytorch_model.bin", "pytorch_model-*-of-*.bin", "pytorch_model.bin.index.json")
SAFE_WEIGHTS = ("model.safetensors", "model-*-of-*.safetensors", "model.safetensors.index.json")


def _matching(folder, patterns):
    return sorted(name for name in os.listdir(folder) if any(fnmatch.fnmatch(name, pattern) for pattern in patterns))


def conversion_code(folder, config=None, default_class="AutoModelForSequenceClassification"):
    """Two lines of Python that turn the pickled weights of `folder` into model.safetensors beside them, with the
    class its config.json names (`architectures`; else `default_class`): for a user who trusts the file."""
    import importlib

    import transformers

    package = importlib.import_module("hf_longdoc")  # loaded already: this module is one of its own
    name = next(iter((config or {}).get("architectures") or []), None)
    if isinstance(name, str) and hasattr(package, name):
        source = "hf_longdoc"
    elif isinstance(name, str) and hasattr(transformers, name):
        source = "transformers"
    else:
        source, name = "transformers", default_class
    prefix = "import hf_longdoc; " if source == "transformers" and name.startswith("Auto") else ""
    return (f"{prefix}from {source} import {name}; "
            f"{name}.from_pretrained({folder!r}, use_safetensors=False).save_pretrained({folder!r})")


def require_safe_weights(folder, argument, default_class="AutoModelForSequenceClassification", need_weights=True):
    """A ValueError naming `argument` when the local model folder `folder` holds its weights only as pickled PyTorch
    files (pytorch_model.bin: `torch.load` would unpickle them, and a malicious pickle can run code), saying how to
    convert them; or no weights at all (when `need_weights`). Nothing is read but the file names and config.json. A
    Hub id passes (the loaders' own checks apply)."""
    path = os.path.expanduser(os.fspath(folder))
    if not os.path.isdir(path) or _matching(path, SAFE_WEIGHTS):
        return
    pickled = _matching(path, PICKLED_WEIGHTS)
    if not pickled and not need_weights:
        return
    if not pickled:
        raise ValueError(f"{argument} {folder!r} holds no model weights (no model.safetensors); pass the folder a "
                         "model was saved to with `save_pretrained` (or `hf-longdoc train --output-dir`).")
    try:
        with open(os.path.join(path, "config.json"), encoding="utf-8") as f:
            config = json.load(f)
    except (OSError, UnicodeDecodeError, json.JSONDecodeError):
        config = None
    config = config if isinstance(config, dict) else None
    raise ValueError(f"{argument} {folder!r} holds its weights only as pickled PyTorch files ({', '.join(pickled)}), "
                     "which hf-longdoc never loads (unpickling can run code; it reads safetensors only). If you "
                     "trust the file, convert it once in Python, which writes model.safetensors beside it: "
                     f"`{conversion_code(folder, config, default_class)}`")


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
    require_safe_weights(model_dir, argument)
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
    # use_safetensors: never `torch.load` (checked above with a message; this guards a folder changed since)
    model, info = model_class.from_pretrained(model_dir, output_loading_info=True, ignore_mismatched_sizes=True,
                                              trust_remote_code=False, use_safetensors=True, **loading)
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
    from ..data import load_tokenizer

    saved_config(model_dir, argument)
    return load_tokenizer(model_dir, argument, fix)


# The model folder's files that change predictions (its card, metrics and manifest do not)
MODEL_FILES = ("config.json", "*.safetensors", "*.bin", "tokenizer*", "vocab*", "merges.txt",
               "special_tokens_map.json", "added_tokens.json", "*.model")


def model_digest(model_dir):
    """A SHA-256 per file of `model_dir` that changes predictions (config, weights, tokenizer)."""
    from .run_folder import file_digest

    return {name: file_digest(os.path.join(model_dir, name)) for name in sorted(os.listdir(model_dir))
            if os.path.isfile(os.path.join(model_dir, name))
            and any(fnmatch.fnmatch(name, pattern) for pattern in MODEL_FILES)}


__all__ = ["conversion_code", "load_saved_model", "load_saved_tokenizer", "model_digest", "require_safe_weights",
           "saved_config"]
