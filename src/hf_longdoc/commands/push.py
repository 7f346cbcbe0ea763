"""`hf-longdoc push`: upload a saved model, with its model card, to the Hub."""

from .options import Formatter


def add_parser(subparsers):
    parser = subparsers.add_parser("push", formatter_class=Formatter,
                                   help="upload a saved model (with its model card) to the Hub")
    parser.add_argument("output_dir", help="the folder of a saved model")
    parser.add_argument("--repo-id", required=True, help="USER/NAME")
    parser.add_argument("--dry-run", action="store_true",
                        help="list what would be uploaded, and upload nothing (--dry-run-dir writes it to a folder)")
    parser.add_argument("--dry-run-dir", default=None,
                        help="with --dry-run: a new or empty folder where it writes what would be uploaded (None: only "
                             "list it)")
    visibility = parser.add_mutually_exclusive_group()
    visibility.add_argument("--private", dest="private", action="store_true",
                            help="create the repository as private (the default)")
    visibility.add_argument("--public", dest="private", action="store_false",
                            help="create the repository as public (Hub repositories are otherwise public)")
    parser.set_defaults(private=True)
    parser.add_argument("--license", default=None, metavar="ID",
                        help="the license the card states, a Hub license id (apache-2.0, mit, cc-by-4.0, other, ...; "
                             "another is refused with the closest ids): the training data's terms decide which you "
                             "may choose; None: unknown")
    parser.add_argument("--replace-card", action="store_true",
                        help="write a new model card even where the folder's README.md was edited or is not "
                             "hf-longdoc's")
    parser.set_defaults(run=run)


def run(args):
    from ..publishing.hub import push_to_hub

    folder, files = push_to_hub(args.output_dir, args.repo_id, dry_run=args.dry_run, dry_run_dir=args.dry_run_dir,
                                private=args.private, replace_card=args.replace_card, license=args.license)
    if args.dry_run and folder is not None:
        print(f"Dry run: would upload {folder} to {args.repo_id} ({'private' if args.private else 'public'}):")
    elif args.dry_run:
        print(f"Dry run: would upload these files of {args.output_dir} to {args.repo_id} "
              f"({'private' if args.private else 'public'}; --dry-run-dir DIR writes them there, the card included, "
              "to read before uploading):")
    else:
        print(f"Uploaded {args.output_dir} to https://huggingface.co/{args.repo_id} "
              f"({'private' if args.private else 'public'}):")
    for name in files:
        print(f"  {name}")
    replaced = getattr(files, "replaced", [])
    if replaced:
        print(f"Local paths replaced in the {'files it would upload' if args.dry_run else 'uploaded files'} "
              f"({args.output_dir} keeps them as they are):")
    for name, key, old, new in replaced:
        print(f"  {name} {key}: {old} -> {new}")
