"""`hf-longdoc push`: upload a saved model, with its model card, to the Hub."""

from .options import Formatter


def add_parser(subparsers):
    parser = subparsers.add_parser("push", formatter_class=Formatter,
                                   help="upload a saved model (with its model card) to the Hub")
    parser.add_argument("output_dir", help="the folder of a saved model")
    parser.add_argument("--repo-id", required=True, help="USER/NAME")
    parser.add_argument("--dry-run", action="store_true", help="write the folder that would be uploaded, and list it")
    parser.add_argument("--dry-run-dir", default=None,
                        help="a new or empty folder where --dry-run writes (None: a new temporary folder)")
    parser.add_argument("--private", action="store_true", help="create the repository as private")
    parser.set_defaults(run=run)


def run(args):
    from ..hub import push_to_hub

    folder, files = push_to_hub(args.output_dir, args.repo_id, dry_run=args.dry_run, dry_run_dir=args.dry_run_dir,
                                private=args.private)
    if args.dry_run:
        print(f"Dry run: would upload {folder} to {args.repo_id}:")
    else:
        print(f"Uploaded {args.output_dir} to https://huggingface.co/{args.repo_id}:")
    for name in files:
        print(f"  {name}")
