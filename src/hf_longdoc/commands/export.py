"""`hf-longdoc export`: a saved classifier as an ONNX graph, checked in onnxruntime."""

from .options import Formatter


def add_parser(subparsers):
    parser = subparsers.add_parser("export", formatter_class=Formatter,
                                   help="export a saved classifier to ONNX (inputs input_ids and attention_mask, "
                                        "output logits) and check it in onnxruntime")
    parser.add_argument("model_dir", help="the folder of a saved model; without a tokenizer there, the graph is "
                                          "traced and checked with ids drawn from the config's vocabulary")
    parser.add_argument("--format", default="onnx", choices=["onnx"], help="the graph format")
    parser.add_argument("--output-dir", required=True, help="where model.onnx is written")
    parser.add_argument("--overwrite", action="store_true",
                        help="replace an existing OUTPUT_DIR/model.onnx that hf-longdoc did not write (or that was "
                             "changed since); an earlier export's, unchanged, is replaced without it")
    parser.set_defaults(run=run)


def run(args):
    from ..export import export_onnx

    report = export_onnx(args.model_dir, args.output_dir, overwrite=args.overwrite)
    shapes = " and ".join("x".join(map(str, shape)) for shape in report["checked_shapes"])
    print(f"Wrote {report['path']} (traced at {'x'.join(map(str, report['traced_shape']))}); onnxruntime agrees with "
          f"PyTorch within {report['max_abs_difference']:.1e} at input shapes {shapes}.")
