"""Train a pretrained model's new head on features its frozen backbone computes once: the linear-probe stage.

A frozen backbone maps a document to the same vectors in every epoch, so they are computed once (the family's
registry `frozen_features`: a segment LM's segment vectors z and their mask, a sparse Longformer's pooled state or,
for its gated mean, every final state and the mask) and the head (`head_logits`: the biLSTM, attention and classifier
of Eq. 3-7; Longformer's classification head, with the gate) trains on that cache for many epochs in seconds. Two
uses:

- `--freeze-backbone`: the head is all that trains (for users without a GPU); the saved model is still the whole
  `PreTrainedModel`, backbone included, and runs through `pipeline` as any other.
- the first stage of linear probing then fine-tuning (LP-FT; Kumar et al., "Fine-Tuning can Distort Pretrained Features
  and Underperform Out-of-Distribution", ICLR 2022, https://arxiv.org/abs/2202.10054, Section 4): fine-tuning then
  starts from a head that already reads the pretrained features, instead of a random one whose large early gradients
  disturb the backbone.

The cache lives in memory only: nothing is written into the run's folder.
"""

import copy
import logging
import math
import statistics
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import NamedTuple

import numpy as np
import torch
from transformers import DataCollatorWithPadding, EvalPrediction

from ..inference.reading import DEFAULT_THRESHOLD
from ..metrics import compute_metrics_fn, correct_decisions, score_name
from ..saving.run_folder import RunDiverged
from ..utils.parsing import settings_text
from ..utils.rules import NON_NEGATIVE_INTEGER
from ..utils.threads import forked_workers, one_thread_each, per_thread, reading_workers, small_op_phase

logger = logging.getLogger(__name__)


CACHE_SHARE = 0.5  # of the memory free where the model runs, the most the head stage's cache may take


def free_memory(device):
    """Bytes free on `device`: the GPU's free memory, or the machine's available RAM."""
    if device.type == "cuda":
        return torch.cuda.mem_get_info(device)[0]
    import psutil

    return psutil.virtual_memory().available


@torch.no_grad()
def cached_features(model, family, dataset, tokenizer, batch_size=8, progress=True, autocast_dtype=None):
    """The tensors `family.frozen_features` gives for every document of `dataset` (tokenized, with `input_ids` and
    `attention_mask`), batch first, computed once in eval mode; under autocast to `autocast_dtype` (a bf16 / fp16 run:
    the backbone runs as fine-tuning will run it) and kept in float32 for the head."""
    from tqdm.auto import tqdm

    rows = dataset.select_columns(["input_ids", "attention_mask"])
    model.eval()
    grad = torch.is_grad_enabled()  # thread-local: the readers below take the caller's
    # each reader pads with its own tokenizer (a fast one padding for two threads at once can fail)
    collators = per_thread(lambda: DataCollatorWithPadding(copy.deepcopy(tokenizer)))

    def encode(start):
        batch = collators()([rows[i] for i in range(start, min(start + batch_size, len(rows)))])
        with torch.set_grad_enabled(grad), torch.autocast(model.device.type, dtype=autocast_dtype,
                                                          enabled=autocast_dtype is not None):
            features = family.frozen_features(model, batch["input_ids"].to(model.device),
                                              batch["attention_mask"].to(model.device))
        return [feature.detach().float() if feature.is_floating_point() else feature.detach() for feature in features]

    # on the CPU several batches at once, each on one thread, as `predict` reads (`threads.reading_workers`)
    workers = reading_workers(model.device, family.concurrent_inference)
    starts = range(0, len(rows), batch_size)
    with ThreadPoolExecutor(max_workers=workers) as readers, one_thread_each(workers):
        parts = list(tqdm(readers.map(encode, starts), total=len(starts), desc="Encoding with the frozen backbone",
                          unit="batch", disable=not progress))
    return [torch.cat(tensors) for tensors in zip(*parts)]


class CachedSplit(NamedTuple):
    """A split's frozen features, their labels, and which of the split's documents they are (all, in order, unless
    the memory set aside could not hold them)."""

    features: list
    labels: torch.Tensor
    documents: list


def cached_split(model, family, split, tokenizer, batch_size, autocast_dtype, max_bytes, multi_label, progress=True,
                 deadline=None, documents_after=0):
    """The `CachedSplit` of a split for the head stage, the features taking at most `max_bytes`.

    Every document when they fit. The size of a document's features is measured on the first batch. A family that
    caches every state (the sparse Longformer's gated mean: length × width floats a document) could otherwise fill the
    memory fine-tuning needs on a large dataset; then the stage reads documents spread evenly over the split (every
    label of a split sorted by label is among them), as many as fit, and says so. No document is encoded twice: those
    of the first batch that are read come from the measurement.

    With a `deadline` (a `time.monotonic()` reading: the run's --time-budget), the first batch's time also says how
    long the rest will take (this split's documents and `documents_after` more); a stage that would end past the
    deadline is a ValueError then, before the long encoding, rather than a budget overrun found at the end."""
    first = split.select(range(min(batch_size, len(split))))
    started = time.monotonic()
    probe = cached_features(model, family, first, tokenizer, batch_size, False, autocast_dtype)
    check_encoding_fits(deadline, (time.monotonic() - started) / len(first), len(split) - len(first) + documents_after)
    per_document = sum(feature.nbytes for feature in probe) / len(first)
    fits = max(len(first), int(max_bytes // per_document))
    chosen = list(range(len(split)))
    if fits < len(split):
        logger.warning("The frozen features of all %d documents would take %.1f GB, more than the %.1f GB set aside "
                       "for them (half the free memory); the head stage reads %d of them, spread evenly (fine-tuning "
                       "reads every document). Lower --max-length, or pass --head-epochs 0 to skip the stage.",
                       len(split), per_document * len(split) / 1e9, max_bytes / 1e9, fits)
        chosen = torch.linspace(0, len(split) - 1, fits).round().long().tolist()
    measured = [i for i in chosen if i < len(first)]  # ascending, so they lead
    features = [feature[measured] for feature in probe]
    if len(chosen) > len(measured):
        rest = cached_features(model, family, split.select(chosen[len(measured):]), tokenizer, batch_size, progress,
                               autocast_dtype)
        features = [torch.cat(pair) for pair in zip(features, rest)]
    return CachedSplit(features, labels_of(split.select(chosen), multi_label), chosen)


def check_encoding_fits(deadline, seconds_per_document, documents):
    """A ValueError when encoding `documents` more at `seconds_per_document` ends past `deadline` (None: no budget)."""
    if deadline is None:
        return
    needed, left = seconds_per_document * documents, deadline - time.monotonic()
    if needed > left:
        raise ValueError(f"The head stage alone would take about {needed / 60:.1f} more minutes to encode {documents} "
                         f"documents with the frozen backbone ({seconds_per_document:.2f} s each, measured), and "
                         f"`time_budget` (--time-budget) leaves {max(left, 0) / 60:.1f}; raise --time-budget, lower "
                         "--max-length, or pass --head-epochs 0 to skip the stage.")


def labels_of(dataset, multi_label):
    """The labels of a tokenized split as the tensor the loss reads."""
    return torch.tensor(dataset["label"], dtype=torch.float32 if multi_label else torch.long)


def fit_head(model, family, head_parameters, train, validation, epochs=50, learning_rate=1e-3, batch_size=8, seed=42,
             multi_label=False, threshold=DEFAULT_THRESHOLD, patience=10, deadline=None):
    """Train the parameters named `head_parameters` on cached features: `train` and `validation` are
    (features, labels) from `cached_features` and `labels_of`. AdamW at `learning_rate`, mini-batches of `batch_size`
    in a seeded order, for at most `epochs`; the head of the epoch with the best validation accuracy (micro-F1 for
    multi-label) is kept, and training stops after `patience` epochs in which neither the score nor the validation
    loss improved (a linear head's loss falls long after 80 documents' accuracy stops rising: stopped on accuracy
    alone it is underfit, and loses the choice over folds it should win). A non-finite loss is a
    `RunDiverged`; at `deadline` (a `time.monotonic()` reading) the stage stops after the epoch. Returns (what
    happened: epochs run, best epoch, its validation score, seconds; the head's weights at the epoch of the lowest
    validation loss, the calibrated start for fine-tuning: see `HeadStage.run`). On a CPU it runs on one thread
    (`threads.small_op_phase`: its operations are small, and on shared cores each would wait for the others)."""
    with small_op_phase("The head stage", model.device):
        return _fit_head(model, family, head_parameters, train, validation, epochs, learning_rate, batch_size, seed,
                         multi_label, threshold, patience, deadline)


def _fit_head(model, family, head_parameters, train, validation, epochs, learning_rate, batch_size, seed, multi_label,
              threshold, patience, deadline):
    """`fit_head`, on the threads it chose."""
    head = {name: p for name, p in model.named_parameters() if name in set(head_parameters)}
    if not head:
        raise ValueError("No head parameters to fit: the model has no parameters its backbone does not supply.")
    optimizer = torch.optim.AdamW(head.values(), lr=learning_rate, weight_decay=0.01)
    score = compute_metrics_fn(multi_label, threshold)
    key = score_name(multi_label)
    (features, labels), (validation_features, validation_labels) = train[:2], validation[:2]
    generator = torch.Generator().manual_seed(seed)
    best_score, best_state, best_epoch, start = float("-inf"), None, 0, time.perf_counter()
    lowest_loss, calibrated_state, calibrated_epoch = float("inf"), None, 0
    for epoch in range(1, epochs + 1):
        model.train()  # the head's dropout; the backbone does not run
        for rows in torch.randperm(len(labels), generator=generator).split(batch_size):
            logits = family.head_logits(model, *(feature[rows] for feature in features))
            loss = model.loss_function(labels=labels[rows].to(logits.device), pooled_logits=logits,
                                       config=model.config)
            if not torch.isfinite(loss):
                raise RunDiverged(f"Fitting the head on frozen features diverged in epoch {epoch} (loss {loss.item()}) "
                                  f"with learning rate {learning_rate:g}; lower --head-learning-rate.")
            optimizer.zero_grad(set_to_none=True)
            loss.backward()
            optimizer.step()
        model.eval()
        with torch.no_grad():
            logits = family.head_logits(model, *validation_features)
        value = score(EvalPrediction(predictions=logits.float().cpu().numpy(),
                                     label_ids=validation_labels.numpy()))[key]
        validation_loss = model.loss_function(labels=validation_labels.to(logits.device), pooled_logits=logits,
                                              config=model.config).item()
        if validation_loss < lowest_loss:
            lowest_loss, calibrated_epoch = validation_loss, epoch
            calibrated_state = {name: p.detach().clone() for name, p in head.items()}
        if value > best_score:
            best_score, best_epoch = value, epoch
            best_state = {name: p.detach().clone() for name, p in head.items()}
        elif epoch - max(best_epoch, calibrated_epoch) >= patience:  # neither the score nor the loss improves
            break
        if deadline is not None and time.monotonic() >= deadline and epoch < epochs:
            logger.warning("The time budget is spent: the head stage stops after epoch %d of %d (its best epoch, %d, "
                           "is kept).", epoch, epochs, best_epoch)
            break
    with torch.no_grad():
        for name, p in head.items():
            p.copy_(best_state[name])
    report = {"epochs_run": epoch, "best_epoch": best_epoch, f"validation_{key}": best_score,
              "lowest_validation_loss": lowest_loss, "lowest_validation_loss_epoch": calibrated_epoch,
              "seconds": time.perf_counter() - start,
              "learning_rate": learning_rate}
    logger.info("Fitted the head on frozen features: %s", report)
    return report, calibrated_state


def new_parameter_names(model, family=None):
    """The parameters a pretrained backbone does not supply: those outside `model.base_model` (its head, which is
    what Transformers leaves newly initialised when a base checkpoint loads into a head model) and, inside it, those
    under the family's `new_with_backbone` prefixes (the elementwise byte and focus embeddings)."""
    base = model.base_model_prefix + "."
    extra = family.new_with_backbone if family is not None else ()
    return [name for name, _ in model.named_parameters() if not name.startswith(base) or name.startswith(extra)]


def head_parameter_names(model, plan):
    """The names of the parameters the head stage trains: the new ones (`new_parameter_names`: the head, whichever
    readout it now is) and the plan's others (a family's `new_with_backbone`)."""
    names = set(new_parameter_names(model)) | set(plan.head_parameters)
    return tuple(name for name, _ in model.named_parameters() if name in names)


CHOICE_FOLDS = 5  # the choice among heads: folds of the training and validation documents together


def split_score(model, family, features, labels, multi_label, threshold):
    """The head's validation score (accuracy, or micro-F1 for multi-label) on cached `features` and `labels`."""
    model.eval()
    with torch.no_grad():
        logits = family.head_logits(model, *features)
    return compute_metrics_fn(multi_label, threshold)(EvalPrediction(predictions=logits.float().cpu().numpy(),
                                                                     label_ids=labels.numpy()))[score_name(multi_label)]


def fold_score(model, plan, names, features, labels, folds, k, epochs):
    """Fold `k`'s score by the head (the parameters `names`) fitted from where it is now on the other folds, its
    epochs stopped on an eighth of them. The head's dropout draws from `plan.seed` + `k`, so a fold scores the same
    in any process and any order."""
    fold = folds[k]
    rest = torch.cat([other for j, other in enumerate(folds) if j != k])
    stop, fit_rows = rest[:len(rest) // 8], rest[len(rest) // 8:]
    part = [([feature[rows] for feature in features], labels[rows]) for rows in (fit_rows, stop)]
    torch.manual_seed(plan.seed + k)
    fit_head(model, plan.family, names, *part, epochs, plan.head_learning_rate or 1e-3, plan.batch_size, plan.seed,
             plan.multi_label, plan.threshold, deadline=plan.deadline)
    return split_score(model, plan.family, [feature[fold] for feature in features], labels[fold], plan.multi_label,
                       plan.threshold)


def cross_validated_score(model, plan, names, train, validation, epochs, alongside=None, workers=1):
    """The scores of the model's head (the parameters `names`, as they are now) over `CHOICE_FOLDS` folds of the
    training and validation documents together, each fold scored by the head fitted anew on the others (its epochs
    stopped on an eighth of them; `fold_score`). What the choice among heads weighs: 640 documents where the
    validation split alone has 80, whose best epoch flatters the larger head (bbc-late, seed 42, z_1 as the head +
    tail window: `att` 79 of 80 on validation, .941 over the folds and .906 on test; `base` .963, .950 and .913).

    The folds are independent fits on one thread each: with `workers` > 1 (`threads.forked_workers`), that many
    processes share them, this one and `workers` - 1 forked copies of it (the features and the model shared with
    it, not copied), each fold's score the same as in this process. `alongside()`: more work of this process that
    starts from the head as it is now (the head's own fit), done after its share of folds, its result returned with
    the scores; the head is then left as `alongside` left it, else as it came. Returns (each fold's score, in fold
    order; `alongside()`'s result or None)."""
    features = [torch.cat(pair) for pair in zip(train[0], validation[0])]
    labels = torch.cat([train[1], validation[1]])
    start = {name: p.detach().clone() for name, p in model.named_parameters() if name in names}
    order = torch.randperm(len(labels), generator=torch.Generator().manual_seed(plan.seed))
    folds = list(order.chunk(CHOICE_FOLDS))
    jobs = list(range(len(folds))) + ([None] if alongside is not None else [])  # None: `alongside`
    workers = max(1, min(workers, len(jobs)))
    shares = [jobs[-1 - w::-workers][::-1] for w in range(workers)]  # this process ends with `alongside`

    def score(share):
        """{k: fold k's score} of the folds in `share`, each fitted from the starting head."""
        scores = {}
        for k in share:
            model.load_state_dict(start, strict=False)
            scores[k] = fold_score(model, plan, names, features, labels, folds, k, epochs)
        return scores

    children = [ForkedWork(lambda share=share: score(share)) for share in shares[1:]]  # forked from the start head
    scores = score([k for k in shares[0] if k is not None])
    result = None
    if alongside is not None:
        model.load_state_dict(start, strict=False)
        result = alongside()
    for child, share in zip(children, shares[1:]):
        received = child.results()
        if received is None:  # the copy failed (its reason logged): its folds are fitted here
            kept = {name: p.detach().clone() for name, p in model.named_parameters() if name in names}
            received = score(share)
            model.load_state_dict(kept, strict=False)
        scores.update(received)
    if alongside is None:
        model.load_state_dict(start, strict=False)
    return [scores[k] for k in range(len(folds))], result


class ForkedWork:
    """`work()` in a forked copy of this process on one thread (Linux, CPU; `threads.forked_workers`), its result
    (small picklable values) sent back through a pipe; `results()` waits for it, None if the copy failed
    (logged)."""

    def __init__(self, work):
        import multiprocessing

        context = multiprocessing.get_context("fork")
        self.receiver, sender = context.Pipe(duplex=False)

        def run():
            torch.set_num_threads(1)  # no parallel region in a forked copy (an OpenMP pool does not survive a fork)
            try:
                sender.send(("done", work()))
            except Exception as error:  # reported to the parent, which then does the work itself
                sender.send(("failed", f"{type(error).__name__}: {error}"))
            finally:
                sender.close()

        self.process = context.Process(target=run, daemon=True)
        self.process.start()
        sender.close()

    def results(self):
        try:
            status, value = self.receiver.recv()
        except (EOFError, OSError) as error:
            status, value = "failed", f"it ended without a result ({type(error).__name__}; exit code "\
                                      f"{self.process.exitcode})"
        finally:
            self.receiver.close()
            self.process.join()
        if status == "done":
            return value
        logger.warning("A forked process fitting the head choice's folds failed (%s): its folds are fitted in this "
                       "process instead.", value)
        return None


class FoldScores(NamedTuple):
    """A head's scores over the choice's folds (`cross_validated_score`): their mean and its standard error."""

    scores: list

    @property
    def mean(self):
        return statistics.fmean(self.scores)

    @property
    def standard_error(self):
        """The sample standard deviation of the fold scores over sqrt(folds): the standard error of their mean."""
        return statistics.stdev(self.scores) / math.sqrt(len(self.scores)) if len(self.scores) > 1 else 0.0


def one_standard_error_choice(fitted):
    """The index of the head to keep among `fitted`, (`FoldScores`, parameters) pairs in the configured order: the
    head of fewest parameters whose mean score over the folds is within one standard error of the best mean (then the
    configured order), the one-standard-error rule of cross-validation (Breiman et al., "Classification and
    Regression Trees", 1984, Sec. 3.4.3; Hastie, Tibshirani & Friedman, "The Elements of Statistical Learning", 2nd
    ed., Sec. 7.10). Why the smaller head on near-ties: the folds score heads on the frozen backbone, and the heads
    the choice weighs differ 500-fold in size (the segment LM's linear `base` on the head + tail window against
    `att`); a linear head on frozen features understates what fine-tuning makes of it (bbc-late, seed 43, the folds
    .9359 against `att`'s .9375: `att` fine-tuned .944 on test, `base` on the window .969, docs/results.md), and
    within one standard error the folds cannot tell the two apart anyway."""
    best = max(range(len(fitted)), key=lambda i: (fitted[i][0].mean, -fitted[i][1], -i))
    floor = fitted[best][0].mean - fitted[best][0].standard_error
    return max((i for i in range(len(fitted)) if fitted[i][0].mean >= floor), key=lambda i: (-fitted[i][1], -i))


def fit_readouts(model, plan, train, validation, epochs):
    """`fit_head` for the model's head and for each other head its family offers (`readout_choices`, e.g. the
    segment LM's `variant_candidates`) on the same cached features, each new one drawn after `set_seed(plan.seed)`.
    Each head is scored over `CHOICE_FOLDS` folds (`cross_validated_score`), and the one `one_standard_error_choice`
    picks stays in the model with its settings, fitted on the training split and stopped on validation as a single
    head is. Not the validation split's score alone: 80 documents cannot tell apart heads a few documents apart, and
    the best of a larger head's epochs flatters it; not the validation loss for ties: it favours the head that fits
    fastest (bbc-late, seed 43, z_1 as the head + tail window: `att` and `base` both 75 of 80, losses .19 and .47,
    the linear `base` head still converging when its accuracy stopped it). Returns (its report, with each
    candidate's fold scores, their mean, its standard error, validation score, loss and size under `readouts` when
    there were several; its calibrated state)."""
    from transformers import set_seed

    def fit(names):
        return fit_head(model, plan.family, names, train, validation, epochs, plan.head_learning_rate or 1e-3,
                        plan.batch_size, plan.seed, plan.multi_label, plan.threshold, deadline=plan.deadline)

    choices = plan.family.readout_choices(model.config) if plan.family is not None else []
    if not choices:
        return fit(plan.head_parameters)
    fitted = []  # (FoldScores, head parameters, settings, head module, report, calibrated state)
    workers = forked_workers(model.device)
    for changes in [{}] + choices:
        if changes:
            set_seed(plan.seed)
            plan.family.set_readout(model, changes)
        settings = {key: getattr(model.config, key) for choice in choices for key in choice}
        names = set(head_parameter_names(model, plan) if changes else plan.head_parameters)

        def fit_on_the_training_split(names=names):
            set_seed(plan.seed)  # the head's dropout: the same draws whichever process fits the folds
            return fit(names)

        fold_scores, (report, calibrated) = cross_validated_score(model, plan, names, train, validation, epochs,
                                                                  alongside=fit_on_the_training_split,
                                                                  workers=workers)
        size = sum(p.numel() for name, p in model.named_parameters() if name in names)
        fitted.append((FoldScores(fold_scores), size, settings, model.head, report, calibrated))
    folds, _, settings, head, report, calibrated = fitted[one_standard_error_choice(fitted)]
    best = max(fit[0].mean for fit in fitted)
    plan.family.set_readout(model, settings, head)
    key = f"validation_{score_name(plan.multi_label)}"
    report = {**report, "readout": settings,
              "readouts": [{**fit[2], "cross_validated_score": fit[0].mean, "standard_error": fit[0].standard_error,
                            "fold_scores": fit[0].scores, "validation_score": fit[4][key],
                            "validation_loss": fit[4]["lowest_validation_loss"], "head_parameters": fit[1]}
                           for fit in fitted]}
    logger.info("The head stage keeps the head of %s, the smallest within one standard error of the best mean score "
                "over %d folds of the training and validation documents (%.4f; its own %.4f): %s.",
                settings_text(settings), CHOICE_FOLDS, best, folds.mean,
                ", ".join(f"{settings_text(fit[2])}: {fit[0].mean:.4f} ± {fit[0].standard_error:.4f}, validation "
                          f"{fit[4][key]:.4f}, {fit[1]} parameters" for fit in fitted))
    return report, calibrated


def state_copy(model):
    """A copy of the model's weights in CPU memory: the warm start to return to (see `keep_the_better`)."""
    return {name: tensor.detach().to("cpu", copy=True) for name, tensor in model.state_dict().items()}


@dataclass
class WarmStart:
    """What fine-tuning competes with (`keep_the_better`): the model's weights after the head stage (the head of the
    best validation score, the pretrained backbone) and that model's validation logits, from the cached features."""

    state: dict
    validation_logits: torch.Tensor
    validation_documents: list  # which validation documents the logits are of (`CachedSplit.documents`)


PAIRED_Z = 2.0  # McNemar's test, normal approximation: the one-sided 2.3% level


def keep_the_better(model, warm, tuned_logits, labels, multi_label=False, threshold=DEFAULT_THRESHOLD):
    """Return to the warm start (a `WarmStart`) when fine-tuning ended clearly below it on validation, by a paired
    test on the same decisions (McNemar's, in its normal approximation): of the validation decisions the two models
    make differently, the warm start is right on b and the fine-tuned model (`tuned_logits`, a row for each validation
    document, whose `labels` are those) on c; the warm start is
    kept when b - c > PAIRED_Z * sqrt(b + c), so never on fewer than five decisions more (b = 5, c = 0).

    Fine-tuning a small dataset can distort the pretrained features (measured: MiniLM's segment LM on reviews after
    news, validation .763 after the head stage, .663 after two epochs at 1e-4), so the warm start stays the fallback.
    But its score is the best of up to 50 epochs' evaluations on the same few documents, biased upward, and a
    comparison of the two scores against the binomial error of one kept a worse model: z_1 as the head + tail window
    on bbc-late, seed 42, warm start 79 of 80 against fine-tuning's 77, kept, .900 on test where fine-tuned
    defaults score .913-.944 (docs/results.md). A paired count is what the one validation set can say: 3 decisions
    at most against 1 at least is no evidence. Returns (whether it did, the counts and the fraction of the paired
    decisions each model makes right, for the run's report: accuracy on single-label data, the share of (document,
    label) decisions on multi-label data, not the micro-F1 the run keeps its best epoch by)."""
    documents = warm.validation_documents  # the fine-tuned model's rows of the documents the warm start read
    labels = np.asarray(labels)[documents]
    warm_right = correct_decisions(warm.validation_logits, labels, multi_label, threshold)
    tuned_right = correct_decisions(np.asarray(tuned_logits)[documents], labels, multi_label, threshold)
    b, c = int((warm_right & ~tuned_right).sum()), int((tuned_right & ~warm_right).sum())
    kept = b - c > PAIRED_Z * math.sqrt(b + c)
    counts = {"validation_right_only_warm_start": b, "validation_right_only_fine_tuned": c,
              "validation_decisions_right_fine_tuned": float(tuned_right.mean()),
              "validation_decisions_right_warm_start": float(warm_right.mean())}
    if kept:
        model.load_state_dict(warm.state)
        logger.warning("Fine-tuning ended clearly below the head trained on frozen features on validation: of the "
                       "decisions they make differently, the warm start is right on %d and the fine-tuned model on "
                       "%d (more than %.1f sqrt(%d) apart); keeping that head and the pretrained backbone.", b, c,
                       PAIRED_Z, b + c)
    else:
        logger.info("The fine-tuned model is kept: of the validation decisions it and the warm start make differently, "
                    "it is right on %d and the warm start on %d.", c, b)
    return kept, counts


def freeze_backbone(model, head_parameters):
    """Leave only the parameters named `head_parameters` trainable; returns how many tensors were frozen."""
    head = set(head_parameters)
    frozen = 0
    for name, p in model.named_parameters():
        p.requires_grad_(name in head)
        frozen += name not in head
    return frozen


__all__ = ["FitPlan", "HeadStage", "cached_features", "cached_split", "fit_head", "fit_readouts", "freeze_backbone",
           "head_parameter_names", "keep_the_better", "labels_of", "new_parameter_names", "state_copy", "WarmStart"]


@dataclass(frozen=True)
class HeadStage:
    """The recipe for the head of a model started from pretrained weights (see `head_fitting`).

    With a family that can cache its frozen features (its registry `frozen_features`), the new head first trains
    `epochs` on them (linear probing): then either that is all (`freeze_backbone`), or the whole model fine-tunes from
    that warm start (LP-FT, the default). Without a cache, a frozen backbone runs in every epoch and only the head
    learns (`freeze_backbone`), or the whole model fine-tunes from a random head."""

    epochs: int = 0  # epochs of the head on cached features (0: no such stage)
    freeze_backbone: bool = False

    DEFAULT_EPOCHS = 50  # an upper bound: the stage stops 10 epochs after its best validation score

    @classmethod
    def resolve(cls, family, pretrained, freeze_backbone=False, epochs=None):
        """The stage of a run, with a ValueError naming the argument that cannot apply."""
        if freeze_backbone and not pretrained:
            raise ValueError("`freeze_backbone` (--freeze-backbone) keeps a pretrained backbone fixed; pass "
                             "--backbone or --init-from, or train every parameter from scratch without it.")
        cache = pretrained and family is not None and family.has_frozen_features
        if epochs is None:
            return cls(cls.DEFAULT_EPOCHS if cache else 0, freeze_backbone)
        NON_NEGATIVE_INTEGER.check(epochs, "head_epochs", "head-epochs")
        if epochs and not cache:
            name = family.name if family is not None else "this model"
            raise ValueError(f"`head_epochs` (--head-epochs) trains a new head on cached features of a pretrained "
                             f"backbone, which {name} {'has no' if pretrained else 'does not start from'}; leave it "
                             "out" + ("." if pretrained else ", or pass --backbone."))
        if freeze_backbone and cache and not epochs:
            raise ValueError("`head_epochs` (--head-epochs) 0 with `freeze_backbone` would train nothing; leave it "
                             "out or give a number of epochs.")
        return cls(epochs, freeze_backbone)

    @property
    def trains_end_to_end(self):
        """Whether Trainer still runs after the stage: not when a frozen backbone's head trained on the cache."""
        return not (self.freeze_backbone and self.epochs)

    def run(self, model, plan, encoded, tokenizer, fit=True):
        """Freeze the backbone if asked, and (with `fit`) fit the head on cached features for `epochs`, as `plan` (a
        `FitPlan`) says: its family, new parameters, head rate, batch size and seed; the features encoded under its
        mixed precision when it has one, the head trained in float32. Returns (the report, the warm start), both None
        without the stage. The plan's `deadline` (the run's --time-budget) bounds the stage too: one that could not
        encode its documents in time is refused after the first batch, and the head's epochs stop at it.

        With a frozen backbone the model keeps the head of the best validation score. Before fine-tuning, that model is
        the warm start (a `WarmStart`: its weights and validation logits, what `keep_the_better` weighs and returns to),
        and fine-tuning starts from the head of the lowest validation loss instead: by the epoch of the best score the
        head has usually fitted the training set (MiniLM's segment LM on 560 plain reviews: training loss 0.0005 at the
        first logged step), so its gradients carry no signal but a few large ones that distort the backbone (validation
        .813, then .625 after one epoch at 3e-5). Kumar et al. start fine-tuning from a regularised probe, not a fitted
        one."""
        if self.freeze_backbone:
            frozen = freeze_backbone(model, plan.head_parameters)
            logger.info("Froze %d pretrained parameter tensors; %d new ones train.", frozen, len(plan.head_parameters))
        if not (self.epochs and fit):
            return None, None
        budget = CACHE_SHARE * free_memory(next(model.parameters()).device)
        train_share = len(encoded["train"]) / (len(encoded["train"]) + len(encoded["validation"]))
        batch_size, autocast_dtype = plan.batch_size, plan.autocast_dtype
        train = cached_split(model, plan.family, encoded["train"], tokenizer, batch_size, autocast_dtype,
                             train_share * budget, plan.multi_label, deadline=plan.deadline,
                             documents_after=len(encoded["validation"]))
        validation = cached_split(model, plan.family, encoded["validation"], tokenizer, batch_size, autocast_dtype,
                                  (1 - train_share) * budget, plan.multi_label)
        report, calibrated_head = fit_readouts(model, plan, train, validation, self.epochs)
        if not self.trains_end_to_end:
            return report, None
        model.eval()
        with torch.no_grad():
            warm_logits = plan.family.head_logits(model, *validation[0]).float().cpu()
        warm = WarmStart(state_copy(model), warm_logits, validation.documents)
        model.load_state_dict(calibrated_head, strict=False)
        logger.info("Fine-tuning starts from the head of epoch %d, the lowest validation loss (the warm start to "
                    "compete with is epoch %d's, the best score).", report["lowest_validation_loss_epoch"],
                    report["best_epoch"])
        return report, warm


@dataclass(frozen=True)
class FitPlan:
    """How one model trains, resolved from a run's settings (`train`) or a comparison's entry (`compare`): what
    `fit_model` and `HeadStage.run` read instead of a dozen loose arguments.

    - `args`: Trainer's `TrainingArguments` (epochs, batch size, rates, schedule, seed, mixed precision, device).
    - `stage`: the `HeadStage` (linear probing on cached frozen features, freezing).
    - `family`: the model's `Family` (its cached features and head); None for a Transformers baseline.
    - `head_parameters`: the names of the parameters pretrained weights do not supply (`new_parameter_names`); they
      learn at `head_learning_rate` (None: `args.learning_rate`).
    - `multi_label`, `threshold`: how predictions are scored.
    - `deadline`: the end of the time budget, a `time.monotonic()` reading (None: no budget).
    """

    args: object
    stage: HeadStage = HeadStage()
    family: object = None
    head_parameters: tuple = ()
    head_learning_rate: float | None = None
    multi_label: bool = False
    threshold: float = DEFAULT_THRESHOLD
    deadline: float | None = None

    @property
    def batch_size(self):
        return self.args.per_device_train_batch_size

    @property
    def seed(self):
        return self.args.seed

    @property
    def autocast_dtype(self):
        """The dtype mixed precision computes in (None: float32)."""
        return torch.bfloat16 if self.args.bf16 else torch.float16 if self.args.fp16 else None
