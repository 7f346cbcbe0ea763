"""`hf-longdoc bench`: time and peak memory per length against a Hugging Face baseline, and micro-benchmarks.

With models: each family's own micro-benchmarks follow the table; `--tokenizers` measures tokenizer throughput
instead, `--fit-documents` the cost of fitting selection statistics. Its flags are `BenchCommandSettings`' fields
(help and defaults written there once), the settings of `experiments.bench.run_bench`; nothing heavy is imported until
the command runs, so `--help` answers at once.
"""

from ..experiments.settings import BenchCommandSettings
from .options import Formatter, add_settings_arguments


def add_parser(subparsers):
    parser = subparsers.add_parser("bench", formatter_class=Formatter,
                                   help="forward time and peak memory per length against a HF baseline")
    add_settings_arguments(parser, BenchCommandSettings)
    parser.set_defaults(run=run)


def run(args):
    from ..experiments.bench import micro_benchmarks, run_bench, selection_fit_costs, summary_lines, tokenizer_speeds
    from .options import settings_from

    settings = settings_from(args, BenchCommandSettings)
    if settings.tokenizers:
        tokenizer_speeds(settings.tokenizers, settings.megabytes, elements_per_material=settings.elements_per_material)
        return
    if settings.fit_documents:
        selection_fit_costs(settings.fit_documents, max(settings.lengths))
        return
    rows = run_bench(settings)
    print()
    for line in summary_lines(settings, rows):
        print(line)
    if settings.micro_benchmarks:
        micro_benchmarks(settings)
