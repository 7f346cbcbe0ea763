"""Global-token selection of the sparse-map Longformer (thesis Chapters 4.3, 4.4, 5.4, 5.5), vectorised.

    Eq. 4.3  tf(w, d) = count of w in d / counted tokens of d,   idf(w) = log2(N / df(w)),   score = tf · idf
    Eq. 4.4  PMI(a, b) = log2 P(a, b) / (P(a) P(b)),  over ordered pairs (a before b, fewer than `pmi_window` apart)
             P(a, b) = pair count / all pairs,  P(a) = token count / all tokens   (NLTK's windowed bigram PMI, which
             the thesis' code used)

Counted tokens are real tokens whose id is not excluded (special tokens, punctuation, and stop words when asked:
thesis 5.1, item 5). A document's pairs are formed over its counted tokens alone, in order, both while fitting and
while scoring: two tokens pair when fewer than `pmi_window` counted tokens apart, whatever excluded tokens lie between
them, so every pair counted while fitting gets its fitted PMI when the same document is scored. Statistics come from
training documents only (the thesis' code fitted TF-IDF on the test split), pairs never cross a document boundary (its
code concatenated the corpus), an id unseen in training gets idf = log2 N (as rare as can be), and a pair without
statistics (unseen, or pruned below `pmi_min_count`) has no PMI.

PMI selection (`pmi_selection`):
    "pairs" (thesis 5.4.2, the default): the document's pairs ranked by PMI (ties: the earlier first token, then the
             closer pair); their tokens, pair by pair, become global until `num_global_tokens` are chosen: 64 pairs
             give the thesis' 128 tokens, and a token already chosen (or a repeated id, with `unique_global_tokens`)
             is counted once, its slot refilled from the next pairs.
    "sum":   a position's score is the sum of the PMI of the pairs it forms, and the top positions are chosen like
             TF-IDF's (an earlier reading of the thesis, kept as an option).

Selection runs inside `forward` from `input_ids` (so shuffling cannot mismatch scores and documents, as matching by
row index did in the thesis' code) with tensor ops only: a (batch, vocab) count table for tf, `searchsorted` in the
sorted pair keys for PMI, and one stable sort for the top positions. Self-contained (Hub rule).

Shapes: b batch · n tokens · V vocabulary (`vocab_size`) · P stored pairs (`pmi_num_pairs`) · w - 1 pair distances
(`pmi_window` - 1) · t counted tokens of a batch of documents while fitting (flattened).
"""

import math

import numpy as np
import torch
from torch import nn

from .configuration_sparse_longformer import GLOBAL_SELECTORS, SparseLongformerConfig

SENTINEL_KEY = torch.iinfo(torch.long).max  # ends the sorted pair keys; above any a·vocab_size + b


class GlobalTokenSelector(nn.Module):
    """Holds the fitted statistics as persistent buffers (saved with the weights) and picks global positions.

    Buffers: `idf` (vocab_size,), `pmi_pair_keys` (sorted a·vocab_size + b, int64, then one sentinel that no pair
    matches) and `pmi_pair_values` (PMI of each pair, 0 for the sentinel), and how many documents each statistic was
    fitted on (0: not fitted)."""

    def __init__(self, config: SparseLongformerConfig):
        super().__init__()
        self.config = config
        self.register_buffer("idf", torch.zeros(config.vocab_size))
        self.register_buffer("pmi_pair_keys", torch.full((config.pmi_num_pairs + 1,), SENTINEL_KEY))
        self.register_buffer("pmi_pair_values", torch.zeros(config.pmi_num_pairs + 1))
        self.register_buffer("idf_num_documents", torch.zeros((), dtype=torch.long))
        self.register_buffer("pmi_num_documents", torch.zeros((), dtype=torch.long))

    # --- selection -------------------------------------------------------------------------------------------------

    def excluded_ids(self):
        """Ids never chosen and left out of the statistics (those inside the vocabulary)."""
        config = self.config
        if config.excluded_token_ids is not None:
            ids = config.excluded_token_ids
        else:
            ids = (config.pad_token_id, config.bos_token_id, config.eos_token_id, getattr(config, "sep_token_id", None))
        return sorted({i for i in ids if i is not None and i < config.vocab_size})

    def counted_tokens(self, input_ids, real):
        """(b, n) bool: real tokens with an id that is not excluded: the tokens fitting counts."""
        excluded = torch.zeros(self.config.vocab_size, dtype=torch.bool, device=input_ids.device)
        excluded[self.excluded_ids()] = True
        return real & ~excluded[input_ids]  # (b, n)

    def tfidf_scores(self, input_ids, counted):
        """Eq. 4.3 per position: tf of its token in the document times the token's idf."""
        self.require_fitted("tfidf")
        b = input_ids.shape[0]
        counts = torch.zeros(b, self.config.vocab_size, device=input_ids.device)  # (b, V)
        counts.scatter_add_(1, input_ids, counted.float())
        tf = counts.gather(1, input_ids) / counted.sum(dim=1, keepdim=True).clamp(min=1)  # (b, n)
        return tf * self.idf.float()[input_ids]  # (b, n)

    def document_pairs(self, input_ids, counted):
        """The ordered pairs of each document's counted tokens fewer than `pmi_window` counted tokens apart (as
        fitting forms them) and their fitted PMI: (first, second, pmi), each (b, n, w - 1) with [b, k, d - 1] the pair
        of the k-th counted token and the one d counted tokens later; pmi is NaN where there is no such pair or it
        has no statistics."""
        self.require_fitted("pmi")
        b, n = input_ids.shape
        positions = torch.arange(n, device=input_ids.device)
        # counted positions first, in document order: order[:, k] is the k-th counted token's position
        order = stable_sort(torch.where(counted, positions, positions + n)).indices  # (b, n)
        ids = input_ids.gather(1, order)  # (b, n) in counted order
        present = positions < counted.sum(dim=1, keepdim=True)  # (b, n): k below the document's count
        distances = torch.arange(1, self.config.pmi_window, device=input_ids.device)  # (w - 1,)
        later = (positions[:, None] + distances).clamp(max=n - 1)  # (n, w - 1): k + d, the same for every row
        pair_exists = present[:, :, None] & present[:, later] & (positions[:, None] + distances < n)  # (b, n, w - 1)
        keys = ids[:, :, None] * self.config.vocab_size + ids[:, later]  # (b, n, w - 1)
        index = torch.searchsorted(self.pmi_pair_keys, keys.reshape(-1)).view(keys.shape)  # below the sentinel
        found = pair_exists & (self.pmi_pair_keys[index] == keys)
        pmi = torch.where(found, self.pmi_pair_values.float()[index], float("nan"))
        return order[:, :, None].expand_as(keys), order[:, later], pmi

    def pmi_scores(self, input_ids, counted):
        """`pmi_selection="sum"` (Eq. 4.4 per position): the sum of the PMI of the pairs a position forms."""
        first, second, pmi = self.document_pairs(input_ids, counted)
        pmi = pmi.nan_to_num(0.0).flatten(1)
        scores = torch.zeros(input_ids.shape, device=input_ids.device)
        return scores.scatter_add(1, first.flatten(1), pmi).scatter_add(1, second.flatten(1), pmi)  # (b, n)

    def pmi_pair_ranks(self, input_ids, counted):
        """`pmi_selection="pairs"` (thesis 5.4.2): the document's pairs ranked by PMI (ties: the earlier first token,
        then the closer pair), each position scored by minus the place it first takes in the list first₁, second₁,
        first₂, second₂, ... of the ranked pairs: the top positions by this score are the tokens of the best pairs,
        each counted once. Returns (scores, positions in a pair with PMI), both (b, n)."""
        first, second, pmi = self.document_pairs(input_ids, counted)
        b, n = input_ids.shape
        pmi = pmi.flatten(1)  # (b, n·(w - 1)) in (first token, distance) order
        rank = stable_sort(pmi.nan_to_num(-math.inf), descending=True).indices  # rank -> pair
        listed = torch.stack((first.flatten(1).gather(1, rank), second.flatten(1).gather(1, rank)), dim=2).flatten(1)
        place = torch.arange(listed.shape[1], device=input_ids.device).expand_as(listed).float()
        has_pmi = ~pmi.isnan().gather(1, rank).repeat_interleave(2, dim=1)  # (b, 2·pairs), in list order
        place = place.masked_fill(~has_pmi, math.inf)
        first_place = torch.full((b, n), math.inf, device=input_ids.device).scatter_reduce(1, listed, place, "amin")
        return -first_place, first_place.isfinite()

    def require_fitted(self, selector):
        fitted = self.idf_num_documents if selector == "tfidf" else self.pmi_num_documents
        if not torch.compiler.is_compiling() and int(fitted) == 0:  # (a traced graph cannot read a buffer's value)
            raise ValueError(
                f"global_selector={selector!r} needs statistics fitted on training documents: call "
                "`model.fit_global_selector(train_token_ids)` first (or choose global_selector='cls', 'first_n' or "
                "'random')."
            )

    def selector_name(self, selector):
        """`selector`, or the config's when None; a ValueError for an unknown one."""
        selector = selector or self.config.global_selector
        if selector not in GLOBAL_SELECTORS:
            raise ValueError(f"`selector` must be one of {GLOBAL_SELECTORS}, got {selector!r}.")
        return selector

    def scores(self, input_ids, real, selector=None, generator=None):
        """(scores, candidates): the per-position score `selector` ranks by (higher first) and the (b, n) mask of
        positions that may be chosen. [CLS] (position 0) is never a candidate: it is global anyway."""
        selector = self.selector_name(selector)
        not_first = torch.ones_like(real)
        not_first[:, 0] = False
        if selector in ("cls", "first_n"):
            positions = torch.arange(input_ids.shape[1], device=input_ids.device)
            return -positions.float().expand(input_ids.shape), real & not_first  # (b, n) each
        if selector == "random":
            return torch.rand(input_ids.shape, generator=generator, device=input_ids.device), real & not_first
        counted = self.counted_tokens(input_ids, real)
        if selector == "tfidf":
            return self.tfidf_scores(input_ids, counted), counted & not_first
        if self.config.pmi_selection == "sum":
            return self.pmi_scores(input_ids, counted), counted & not_first
        scores, in_a_pair = self.pmi_pair_ranks(input_ids, counted)
        return scores, in_a_pair & not_first

    def forward(self, input_ids, real, selector=None, generator=None):
        """(b, n) bool global-attention mask: [CLS] (position 0, when real) plus at most `num_global_tokens` positions
        by `selector` (default: the config's). Pads are never chosen."""
        selector = self.selector_name(selector)
        chosen = torch.zeros_like(real)
        chosen[:, 0] = real[:, 0]  # [CLS] is always global
        if selector == "cls" or self.config.num_global_tokens == 0:
            return chosen
        scores, candidates = self.scores(input_ids, real, selector, generator)
        unique = self.config.unique_global_tokens and selector in ("tfidf", "pmi")
        return chosen | top_positions(scores, candidates, input_ids, self.config.num_global_tokens, unique)

    # --- fitting ---------------------------------------------------------------------------------------------------

    @torch.no_grad()
    def fit(self, documents, statistics=("tfidf", "pmi"), batch_documents=256, max_table_pairs=30_000_000,
            progress=True):
        """Fit idf and/or PMI on `documents` (an iterable of token-id sequences: lists, arrays or tensors; training
        documents only) and store them in the buffers. Returns a dict of what was counted.

        Counting is numpy, `batch_documents` at a time: document frequencies with one `np.unique` over
        (document, id) keys, pair counts with one `np.unique` per distance, merged into a running table. If the table
        exceeds `max_table_pairs` distinct pairs, pairs seen once are dropped from it (the counts of the remaining
        pairs become lower bounds; a warning in the returned dict says so)."""
        unknown = set(statistics) - {"tfidf", "pmi"}
        if unknown or not statistics:
            raise ValueError(f"`statistics` must name 'tfidf' and/or 'pmi', got {statistics!r}.")
        config, vocab = self.config, self.config.vocab_size
        excluded = np.zeros(vocab, dtype=bool)
        excluded[self.excluded_ids()] = True
        doc_freq = np.zeros(vocab, dtype=np.int64)
        token_freq = np.zeros(vocab, dtype=np.int64)
        table_keys, table_counts = np.zeros(0, dtype=np.int64), np.zeros(0, dtype=np.int64)
        num_documents = num_pairs = 0
        pruned = False
        try:
            from tqdm.auto import tqdm
        except ImportError:  # tqdm is optional where the saved model is used without hf_longdoc
            def tqdm(iterable, **kwargs):
                return iterable
        for batch in _batches(tqdm(documents, desc="Fitting global-token statistics", unit="doc",
                                   disable=not progress), batch_documents):
            ids, doc = self._flatten(batch, vocab, excluded)  # (t,) each
            num_documents += len(batch)
            if "tfidf" in statistics:
                doc_freq += np.bincount(np.unique(doc * vocab + ids) % vocab, minlength=vocab)
            if "pmi" in statistics:
                token_freq += np.bincount(ids, minlength=vocab)
                keys = [(ids[:-d] * vocab + ids[d:])[doc[:-d] == doc[d:]]  # pairs within one document
                        for d in range(1, min(config.pmi_window, len(ids)))]
                batch_keys, batch_counts = np.unique(np.concatenate(keys) if keys else np.zeros(0, np.int64),
                                                     return_counts=True)
                num_pairs += int(batch_counts.sum())
                table_keys, table_counts = _merge_counts(table_keys, table_counts, batch_keys, batch_counts)
                if len(table_keys) > max_table_pairs:
                    keep = table_counts > 1
                    table_keys, table_counts, pruned = table_keys[keep], table_counts[keep], True
        if num_documents == 0:
            raise ValueError("`fit_global_selector` got no documents; pass the training split's token ids.")
        report = {"documents": num_documents}
        if "tfidf" in statistics:
            idf = np.log2(num_documents / np.maximum(doc_freq, 1))
            self.idf.copy_(torch.from_numpy(idf).to(self.idf))
            self.idf_num_documents.fill_(num_documents)
            report["vocabulary_entries_seen"] = int((doc_freq > 0).sum())  # distinct ids, not occurrences
        if "pmi" in statistics:
            keys, values = _pmi(table_keys, table_counts, token_freq, num_pairs, vocab, config.pmi_min_count,
                                config.pmi_max_pairs)
            device = self.idf.device
            self.pmi_pair_keys = torch.from_numpy(np.append(keys, SENTINEL_KEY)).to(device)
            self.pmi_pair_values = torch.from_numpy(np.append(values, 0.0)).to(device, self.idf.dtype)
            config.pmi_num_pairs = len(keys)
            self.pmi_num_documents.fill_(num_documents)
            report.update(pairs_counted=num_pairs, distinct_pairs=len(table_keys), pairs_kept=len(keys))
            if pruned:
                report["warning"] = (f"more than {max_table_pairs} distinct pairs: pairs seen once were dropped while "
                                     "counting, so counts are lower bounds; raise `max_table_pairs` for exact counts")
        return report

    @staticmethod
    def _flatten(batch, vocab, excluded):
        """The counted ids of a batch of documents as one flat array, and the document index of each."""
        # one flat array per document, then (t,) for the batch
        arrays = [np.asarray(d.cpu() if torch.is_tensor(d) else d, dtype=np.int64).reshape(-1) for d in batch]
        ids = np.concatenate(arrays) if arrays else np.zeros(0, np.int64)
        doc = np.repeat(np.arange(len(arrays)), [len(a) for a in arrays])
        if len(ids) and (ids.min() < 0 or ids.max() >= vocab):
            raise ValueError(f"A document holds token id {int(ids.max())}, outside the vocabulary [0, {vocab}); fit "
                             "with the tokenizer the model uses.")
        keep = ~excluded[ids]
        return ids[keep], doc[keep]


def stop_word_ids(tokenizer, stop_words):
    """Ids of the tokens that are a whole stop word: each word of `stop_words` ("english": scikit-learn's list, or a
    list of words) that the tokenizer maps to a single token, as written, capitalised, and after a space (BPE)."""
    if stop_words == "english":
        try:
            from sklearn.feature_extraction.text import ENGLISH_STOP_WORDS
        except ImportError as error:
            raise ImportError("stop_words='english' reads scikit-learn's list: `pip install scikit-learn`, or pass "
                              "your own list of words.") from error
        stop_words = sorted(ENGLISH_STOP_WORDS)
    ids = set()
    for word in stop_words:
        for form in (word, word.capitalize(), " " + word, " " + word.capitalize()):
            tokens = tokenizer(form, add_special_tokens=False)["input_ids"]
            if len(tokens) == 1:
                ids.add(tokens[0])
    return ids


def excluded_token_ids(tokenizer, vocab_size, stop_words=None):
    """Ids of the tokenizer's special tokens, of every token that decodes to punctuation or whitespace only, and of
    the `stop_words` (see `stop_word_ids`)."""
    import string

    punctuation = set(string.punctuation) | set("“”‘’«»–—…·•")
    ids = set(tokenizer.all_special_ids)
    for i in range(min(len(tokenizer), vocab_size)):
        text = tokenizer.decode([i]).strip()
        if not text or all(ch in punctuation for ch in text):
            ids.add(i)
    if stop_words is not None:
        ids |= stop_word_ids(tokenizer, stop_words)
    return sorted(i for i in ids if i < vocab_size)


class SelectsGlobalTokens:
    """Fitting and selection on a model whose base model holds a `GlobalTokenSelector` as `selector` (the sparse-map
    Longformer and Big Bird)."""

    def fit_global_selector(self, documents, tokenizer=None, statistics=("tfidf", "pmi"), **kwargs):
        """Fit the TF-IDF and PMI statistics on training documents (an iterable of token-id sequences, e.g. a tokenized
        dataset's `input_ids` column) and keep them in the model's buffers, so saving keeps them. With `tokenizer`,
        its special tokens, punctuation-only tokens and `config.stop_words` are first written to
        `config.excluded_token_ids` (selection then leaves out the same tokens). Returns a dict of what was counted;
        keyword arguments go to `GlobalTokenSelector.fit`."""
        if tokenizer is not None:
            self.config.excluded_token_ids = excluded_token_ids(tokenizer, self.config.vocab_size,
                                                                self.config.stop_words)
        elif self.config.stop_words is not None:
            raise ValueError("`config.stop_words` is set: pass the model's tokenizer, "
                             "`fit_global_selector(documents, tokenizer=tokenizer)`, so the words become token ids.")
        return self.base_model.selector.fit(documents, statistics=statistics, **kwargs)

    @torch.no_grad()
    def select_global_tokens(self, input_ids, attention_mask=None, selector=None, generator=None):
        """The (b, n) bool global-token mask `forward` uses for these inputs when given none."""
        real = torch.ones_like(input_ids, dtype=torch.bool) if attention_mask is None else attention_mask.bool()
        return self.base_model.selector(input_ids, real, selector=selector, generator=generator)

    @torch.no_grad()
    def attention_pattern(self, input_ids, attention_mask=None, selector=None):
        """(b, n, n) bool: which keys (columns) each query (row) attends to with these inputs, as `forward` computes
        it (for figures such as thesis Fig. 5.2; dense, so for one document at a time). Also returns the (b, n) global
        mask the selector chose."""
        real = torch.ones_like(input_ids, dtype=torch.bool) if attention_mask is None else attention_mask.bool()
        chosen = self.select_global_tokens(input_ids, attention_mask, selector=selector)
        return self.base_model.attention_pattern_of(chosen, real) & real[:, None, :], chosen


@torch.no_grad()
def init_selector_buffers(module):
    """A new model's selector holds no statistics until `fit_global_selector` (for `_init_weights`)."""
    if isinstance(module, GlobalTokenSelector):
        for buffer in (module.idf, module.pmi_pair_values, module.idf_num_documents, module.pmi_num_documents):
            buffer.zero_()
        module.pmi_pair_keys.fill_(SENTINEL_KEY)


def stable_sort(values, dim=1, descending=False):
    """`torch.sort(values, stable=True)`: (values, indices), ties in index order. A traced graph (ONNX export) takes
    TopK over the whole axis instead: the exporter has no stable sort, and ONNX defines TopK's ties as stable (the
    lower index first)."""
    if torch.compiler.is_compiling():
        return torch.topk(values, values.shape[dim], dim=dim, largest=descending, sorted=True)
    return torch.sort(values, dim=dim, descending=descending, stable=True)


def top_positions(scores, candidates, input_ids, n, unique):
    """(b, n) bool: the `n` candidate positions with the highest score per row (ties: the earlier position); with
    `unique`, only the best position of each distinct token id competes."""
    scores = scores.float().masked_fill(~candidates, -math.inf)
    order = stable_sort(scores, descending=True).indices  # rank -> position, (b, n)
    ranked_ok = candidates.gather(1, order)  # (b, n) in rank order
    if unique:
        ranked_ids = input_ids.gather(1, order)  # (b, n) in rank order
        by_id = stable_sort(ranked_ids)  # groups equal ids, best rank first within a group
        first = torch.ones_like(ranked_ok)
        first[:, 1:] = by_id.values[:, 1:] != by_id.values[:, :-1]
        ranked_ok = ranked_ok & torch.zeros_like(first).scatter(1, by_id.indices, first)  # first back in rank order
    taken = ranked_ok & (ranked_ok.long().cumsum(dim=1) <= n)
    return torch.zeros_like(candidates).scatter(1, order, taken)  # back to positions, (b, n)


def _batches(iterable, size):
    batch = []
    for item in iterable:
        batch.append(item)
        if len(batch) == size:
            yield batch
            batch = []
    if batch:
        yield batch


def _merge_counts(keys, counts, new_keys, new_counts):
    """Sum two sorted (key, count) tables in linear time (`searchsorted` + one insert, no re-sort of the table)."""
    if len(keys) == 0:
        return new_keys, new_counts
    at = np.searchsorted(keys, new_keys)
    seen = at < len(keys)
    seen[seen] = keys[at[seen]] == new_keys[seen]
    counts = counts.copy()
    counts[at[seen]] += new_counts[seen]  # both tables hold unique keys: one addition per slot
    fresh = ~seen
    return np.insert(keys, at[fresh], new_keys[fresh]), np.insert(counts, at[fresh], new_counts[fresh])


def _pmi(keys, counts, token_freq, num_pairs, vocab, min_count, max_pairs):
    """Eq. 4.4 for the pairs seen at least `min_count` times, the `max_pairs` most frequent; keys sorted."""
    keep = counts >= min_count
    keys, counts = keys[keep], counts[keep]
    if len(keys) > max_pairs:
        top = np.sort(np.argsort(-counts, kind="stable")[:max_pairs])  # keep the keys sorted
        keys, counts = keys[top], counts[top]
    num_tokens = token_freq.sum()
    if len(keys) == 0:
        return keys, np.zeros(0, dtype=np.float32)
    a, b = keys // vocab, keys % vocab
    pmi = np.log2(counts / num_pairs) - np.log2(token_freq[a] / num_tokens) - np.log2(token_freq[b] / num_tokens)
    return keys, pmi.astype(np.float32)


__all__ = ["GlobalTokenSelector", "SelectsGlobalTokens", "excluded_token_ids", "top_positions"]
