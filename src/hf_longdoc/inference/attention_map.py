"""The sparse attention map of one document (thesis Fig. 5.2) and its selected global tokens as words (Table 6.1)."""

import os

import torch

from ..saving.run_folder import check_files_free, record_outputs, require_writable_folder
from ..utils.catalog import selector_families
from ..utils.plotting import figure
from .reading import saved_reading_length


def selected_words(model, tokenizer, text, selector=None, max_length=None):
    """The global tokens `model` (a sparse-map Longformer or Big Bird) picks in `text`, best first, as dicts with the
    token's position, the token, the whole word it belongs to (from the fast tokenizer's offsets) and its score; plus
    the encoded input_ids and the (n,) global mask."""
    if not isinstance(text, str) or not text.strip():
        raise ValueError("`text` must be a non-empty string.")
    if not hasattr(model, "select_global_tokens"):
        raise TypeError(f"{type(model).__name__} has no global-token selector; pass a model of "
                        f"{' or '.join(selector_families())}.")
    max_length = max_length or saved_reading_length(model.config, tokenizer)  # what `predict` reads of it
    encoding = tokenizer(text, truncation=True, max_length=max_length, return_offsets_mapping=tokenizer.is_fast,
                         return_tensors="pt")
    input_ids = encoding["input_ids"]
    real = encoding["attention_mask"].bool()
    selector_module = model.base_model.selector
    chosen = model.select_global_tokens(input_ids, encoding["attention_mask"], selector=selector)[0]
    scores, _ = selector_module.scores(input_ids, real, selector=selector)
    tokens = tokenizer.convert_ids_to_tokens(input_ids[0])
    words = _words(encoding, text) if tokenizer.is_fast else tokens
    positions = sorted(chosen.nonzero().flatten().tolist(), key=lambda i: (-float(scores[0, i]), i))
    listing = [{"position": i, "token": tokens[i], "word": words[i], "score": float(scores[0, i])}
               for i in positions if i != 0]
    return listing, input_ids[0], chosen


def _words(encoding, text):
    """For every token, the text of the whole word it is part of."""
    word_ids = encoding.word_ids(0)
    offsets = encoding["offset_mapping"][0].tolist()
    spans = {}
    for word, (start, end) in zip(word_ids, offsets):
        if word is not None:
            first, last = spans.get(word, (start, end))
            spans[word] = (min(first, start), max(last, end))
    return [text[slice(*spans[word])] if word is not None else "" for word in word_ids]


def attention_map(model, tokenizer, text, path, selector=None, max_length=None, resolution=1024):
    """Save a PNG of the attention pattern the model uses for `text` (its `attention_pattern`: Longformer's window band
    and global rows/columns as in thesis Fig. 5.2, Big Bird's blocks) and return the selected tokens (see
    `selected_words`). The n × n map is drawn at `resolution` pixels a side: a pixel is grey when any token pair in it
    attends, black when the key is a selected token."""
    listing, input_ids, chosen = selected_words(model, tokenizer, text, selector, max_length)
    n = len(input_ids)
    pattern = model.attention_pattern(input_ids[None], selector=selector)[0][0]  # (n, n), the model's own rule
    size = min(resolution, n)
    cells = torch.arange(n) * size // n  # token -> pixel
    image = torch.zeros(size, size)
    rows, columns = pattern.nonzero(as_tuple=True)
    image[cells[rows], cells[columns]] = 0.6  # a query attends to a key
    to_selected = chosen[columns]
    image[cells[rows[to_selected]], cells[columns[to_selected]]] = 1.0  # ... that is a selected token: darker

    with figure(path, size=(6, 6)) as axis:
        axis.imshow(image.numpy(), cmap="Greys", vmin=0, vmax=1, extent=(0, n, n, 0), interpolation="nearest")
        selector_name = selector or model.config.global_selector
        axis.set_title(f"{selector_name}: {pattern.float().mean() * 100:.0f}% of pairs attend, "
                       f"{int(chosen.sum())} selected tokens, {n} tokens")
        axis.set_xlabel("key position")
        axis.set_ylabel("query position")
    return listing


def read_document(path, argument="`text_file` (--text-file)"):
    """The text of the UTF-8 file at `path` (a byte-order mark is not part of it). A file that is not UTF-8 is a
    ValueError naming it, the line and the byte, and how to convert it (as the dataset readers say it); a missing or
    blank file is one too."""
    from ..data.loading import check_utf8

    if not os.path.isfile(path):
        raise ValueError(f"{argument} {path!r} does not exist or is not a file.")
    check_utf8(path, f"{argument} {path!r}")
    with open(path, encoding="utf-8-sig") as f:
        text = f.read()
    if not text.strip():
        raise ValueError(f"{argument} {path!r} is empty; pass a file that holds the document.")
    return text


def attention_map_of_saved_model(model_dir, text, path, selector=None, overwrite=False):
    """`attention_map` of the sparse-map Longformer or Big Bird saved in `model_dir` (with its tokenizer), written to
    `path`: a new file, or one hf-longdoc wrote and nobody changed since, unless `overwrite`."""
    from ..saving.saved_models import load_saved_model, load_saved_tokenizer

    if not str(path).lower().endswith(".png"):
        raise ValueError(f"`output` (--output) {path!r} must be a .png file name (e.g. out/attention_map.png).")
    require_writable_folder(os.path.dirname(os.path.abspath(path)), "`output` (--output)")
    check_files_free([path], overwrite, "--overwrite (overwrite=True)")
    model = load_saved_model(model_dir, "`model_dir`")
    tokenizer = load_saved_tokenizer(model_dir, "`model_dir`")
    listing = attention_map(model, tokenizer, text, path, selector=selector)
    record_outputs([path])
    return listing
