"""`hf-longdoc export`: a saved classifier as an ONNX graph, checked in onnxruntime, and optionally quantized."""

import logging
import os

from ..utils.rules import POSITIVE_INTEGER
from .options import Formatter

logger = logging.getLogger(__name__)


def add_parser(subparsers):
    parser = subparsers.add_parser("export", formatter_class=Formatter,
                                   help="export a saved classifier to ONNX (inputs input_ids and attention_mask, "
                                        "output logits) and check it in onnxruntime")
    parser.add_argument("model_dir", help="the folder of a saved model; without a tokenizer there, the graph is "
                                          "traced and checked with ids drawn from the config's vocabulary")
    parser.add_argument("--format", default="onnx", choices=["onnx"], help="the graph format")
    parser.add_argument("--output-dir", default=None,
                        help="where model.onnx is written, beside the model's config.json and tokenizer files (a "
                             "folder Optimum's ORTModelForSequenceClassification loads); None: MODEL_DIR/onnx, where "
                             "`predict --backend onnxruntime` looks for it")
    parser.add_argument("--quantize", default=None, choices=["int8"],
                        help="also write model_quantized.onnx (the name Optimum and Transformers.js look for), "
                             "onnxruntime's dynamic int8 quantization of the graph "
                             "(`predict --backend onnxruntime-int8`), and print both graphs' accuracy on the model's "
                             "test split")
    parser.add_argument("--dataset", default=None,
                        help="with --quantize: the file the model was trained on, whose test split (drawn with the "
                             "seed train recorded) the graphs are scored on; None: the built-in task's, for a model "
                             "trained on it")
    parser.add_argument("--text-column", default="text", help="with --dataset: the column holding the document")
    parser.add_argument("--label-column", default="label", help="with --dataset: the column holding the label")
    parser.add_argument("--batch-size", type=POSITIVE_INTEGER.parse, default=8,
                        help="documents per forward pass while scoring the graphs")
    parser.add_argument("--overwrite", action="store_true",
                        help="replace an existing OUTPUT_DIR/model.onnx (or model_quantized.onnx, config.json, "
                             "tokenizer files) that hf-longdoc did not write (or that was changed since); an earlier "
                             "export's, unchanged, is replaced without it")
    parser.set_defaults(run=run)


def run(args):
    from ..inference.export import export_onnx, quantize_graph

    if args.dataset is not None and args.quantize is None:
        raise ValueError("`--dataset` scores the float and the quantized graph on the model's test split; it needs "
                         "--quantize int8 (or drop --dataset).")
    report = export_onnx(args.model_dir, args.output_dir, overwrite=args.overwrite)
    shapes = " and ".join("x".join(map(str, shape)) for shape in report["checked_shapes"])
    print(f"Wrote {report['path']} (traced at {'x'.join(map(str, report['traced_shape']))}); onnxruntime agrees with "
          f"PyTorch within {report['max_abs_difference']:.1e} at input shapes {shapes}.")
    if args.quantize is None:
        return
    folder = os.path.dirname(report["path"])
    print(f"Wrote {quantize_graph(folder, overwrite=args.overwrite)} (dynamic int8 quantization).")
    accuracies = graph_accuracies(args.model_dir, folder, args.dataset, args.text_column, args.label_column,
                                  args.batch_size)
    if accuracies:
        print("Test accuracy on the model's own test split: "
              + ", ".join(f"{precision} graph {accuracy:.4f}" for precision, accuracy in accuracies.items())
              + f" (recorded in {folder}/export.json).")


def graph_accuracies(model_dir, output_dir, dataset=None, text_column="text", label_column="label", batch_size=8):
    """{precision: test accuracy} of each graph recorded in `output_dir`'s export.json on the model's own test split
    (drawn as `train` drew it: from `dataset`, or the built-in task when the model was trained on it), written into
    export.json; None when no test split can be drawn (a model trained on a file, with no `dataset` given)."""
    from ..inference.export import PRECISIONS, read_record, write_record
    from ..predicting import predict
    from ..saving.saved_models import saved_config
    from ..training.evaluation import documents_to_score, split_seed_of

    if dataset is None and not split_seed_of(model_dir)[1]:
        logger.warning("No --dataset given, and %s was not trained on the built-in task: the graphs' accuracy on its "
                       "test split is not measured (pass --dataset with the file it was trained on).", model_dir)
        return None
    from transformers import PretrainedConfig

    config = PretrainedConfig.from_dict(saved_config(model_dir, "`model_dir`"))
    _, part, multi_label = documents_to_score(model_dir, config, dataset, text_column, label_column, split="test")
    names = [config.id2label[i] for i in range(config.num_labels)]
    gold = [sorted(names[i] for i, on in enumerate(labels) if on) if multi_label else names[labels]  # multi-hot
            for labels in part["label"]]
    record = read_record(output_dir)
    accuracies = {}
    for backend, precision in PRECISIONS.items():
        if precision not in record.get("graphs", {}):
            continue
        rows = predict(model_dir, part.select_columns(["text"]), text_column="text", batch_size=batch_size,
                       backend=backend, graph_dir=output_dir)
        predicted = [sorted(label) if multi_label else label for label in rows["label"]]
        accuracies[precision] = sum(p == g for p, g in zip(predicted, gold)) / len(gold)
        record["graphs"][precision].update(test_accuracy=accuracies[precision], test_documents=len(gold))
    write_record(output_dir, record)
    return accuracies
