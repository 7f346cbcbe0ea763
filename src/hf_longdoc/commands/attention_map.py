"""`hf-longdoc attention-map`: a document's sparse attention map as a PNG and its selected tokens as words."""

from ..utils.catalog import selector_families
from ..utils.rules import POSITIVE_INTEGER
from .options import Formatter, require_model_folder


def add_parser(subparsers):
    families = selector_families()
    selectors = dict.fromkeys(selector for choices in families.values() for selector in choices)
    parser = subparsers.add_parser("attention-map", formatter_class=Formatter,
                                   help=f"{', '.join(families)}: save a PNG of a document's attention map (window "
                                        "band, global rows/columns) and list the selected tokens as words")
    parser.add_argument("model_dir", help=f"a saved model of {' or '.join(families)} with its tokenizer")
    source = parser.add_mutually_exclusive_group(required=True)
    source.add_argument("--text", help="the document")
    source.add_argument("--text-file", help="a file holding the document")
    parser.add_argument("--selector", default=None,
                        help=f"a global-token selector of the model ({', '.join(selectors)}); None: the "
                             "model's global_selector")
    parser.add_argument("--output", default="out/attention_map.png",
                        help="the PNG written (an existing file hf-longdoc did not write is refused)")
    parser.add_argument("--overwrite", action="store_true", help="replace --output even if hf-longdoc did not write it")
    parser.add_argument("--top", type=POSITIVE_INTEGER.parse, default=20, help="selected words to print")
    parser.set_defaults(run=run)


def run(args):
    from ..inference.attention_map import attention_map_of_saved_model, read_document

    require_model_folder(args.model_dir)
    text = read_document(args.text_file, "--text-file") if args.text_file is not None else args.text
    listing = attention_map_of_saved_model(args.model_dir, text, args.output, selector=args.selector,
                                           overwrite=args.overwrite)
    print(f"Wrote {args.output}; top selected tokens (word, score):")
    for item in listing[: args.top]:
        print(f"  {item['position']:>6}  {item['word']!r:<24} {item['token']!r:<16} {item['score']:.4f}")
