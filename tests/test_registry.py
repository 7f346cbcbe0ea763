"""The family registry and the layers around it: sizing, variants and tokens come from one entry per family; code
outside `modeling/` never branches on a family's name; the CLI is thin and shows every default."""

import argparse
import ast
import pathlib
import re

import pytest
import torch

import hf_longdoc
from hf_longdoc.cli import build_parser
from hf_longdoc.commands import COMMANDS
from hf_longdoc.data import fit_wordpiece_tokenizer
from hf_longdoc.modeling import FAMILIES, get_family, resolve

SRC = pathlib.Path(hf_longdoc.__file__).parent
FAMILY_NAMES = set(FAMILIES) | {family.config_class.model_type for family in FAMILIES.values()}
SIZE = dict(hidden_size=32, num_layers=2, num_heads=4, max_length=96, attention_window=16, segment_length=34)


def _strings(node):
    """The string constants of a node that is a constant or a tuple/list/set of them."""
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        return [node.value]
    if isinstance(node, (ast.Tuple, ast.List, ast.Set)):
        return [s for element in node.elts for s in _strings(element)]
    return []


def name_branches(source, names=FAMILY_NAMES):
    """(line, text) of every place in `source` that decides on a family's name: `x == "slstm"`, `x in ("slstm", ...)`,
    `x.startswith("slstm")`, a table keyed by family names, or a lookup with a family name as the key."""
    found = []
    for node in ast.walk(ast.parse(source)):
        operands = []
        if isinstance(node, ast.Compare):
            operands = [node.left, *node.comparators]
        elif isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr in (
                "startswith", "endswith", "partition", "get"):
            operands = list(node.args)
        elif isinstance(node, ast.Dict):
            operands = [key for key in node.keys if key is not None]
        elif isinstance(node, ast.Subscript):
            operands = [node.slice]
        hits = [s for operand in operands for s in _strings(operand) if s.split(":")[0] in names]
        if hits:
            found.append((node.lineno, ", ".join(hits)))
    return found


def test_no_code_outside_modeling_branches_on_a_family_name():
    offenders = []
    for path in SRC.rglob("*.py"):
        # the registry's light table
        if "modeling" in path.relative_to(SRC).parts or path.relative_to(SRC).as_posix() == "utils/catalog.py":
            continue
        offenders += [f"{path.relative_to(SRC)}:{line}: {hit}" for line, hit in name_branches(path.read_text())]
    assert not offenders, "per-family behaviour belongs in the registry:\n" + "\n".join(offenders)


@pytest.mark.parametrize("snippet", [
    'if family.name == "slstm": pass',
    'ok = name in ("sparse_longformer", "longformer")',
    'ok = name.startswith("segment_lm")',
    'TABLE = {"contextualizer": 1}',
    'value = VARIANTS["sparse_longformer"]',
])
def test_the_name_check_catches_each_kind_of_branch(snippet):
    assert name_branches(snippet)


@pytest.mark.parametrize("family", FAMILIES.values(), ids=lambda family: family.name)
def test_from_size_builds_the_budget_under_each_familys_own_names(family):
    config = family.build_config(SIZE, num_labels=3, vocab_size=120)
    assert config.hidden_size == SIZE["hidden_size"] and config.num_hidden_layers == SIZE["num_layers"]
    model = family.classification_class(config).eval()
    width = family.ids_per_position(config)
    input_ids = torch.randint(5, 100, (2, SIZE["max_length"] * width))
    if family.has_statistics:  # e.g. TF-IDF and PMI for the default selector
        family.fit_statistics(model, input_ids.tolist(), None)
    with torch.no_grad():
        logits = model(input_ids=input_ids, attention_mask=torch.ones_like(input_ids)).logits
    assert logits.shape == (2, 3)


def test_from_size_takes_only_the_knobs_a_family_has_and_overrides_win():
    slstm = get_family("slstm").build_config(SIZE)  # attention_window and segment_length do not apply
    assert slstm.num_recurrent_steps == 2 and not hasattr(slstm, "attention_window")
    segment = get_family("segment_lm").build_config(SIZE)
    assert segment.segment_length == 34 and segment.num_segments == 3  # ⌈(96 - 2) / 32⌉
    sparse = get_family("sparse_longformer").build_config({**SIZE, "max_length": 4096}, attention_window=64)
    assert sparse.attention_window == 64 and sparse.num_global_tokens == 128  # the thesis' 128 per 4,096
    with pytest.raises(ValueError, match="max_length"):
        get_family("slstm").build_config({"hidden_size": 8, "num_layers": 1, "num_heads": 1})


def test_variants_resolve_to_their_config_setting_or_name_the_choices():
    assert resolve("sparse_longformer:pmi")[1] == {"global_selector": "pmi"}
    assert resolve("sparse_longformer:longformer")[1] == {"attention_backend": "longformer"}
    assert resolve("segment_lm:rnn")[1] == {"variant": "rnn"}
    assert resolve("slstm") == (get_family("slstm"), {})
    with pytest.raises(ValueError, match="segment_lm:att_ablated"):
        resolve("segment_lm:lstm")
    with pytest.raises(ValueError, match="no variants"):
        resolve("contextualizer:fast")


def test_special_tokens_come_from_the_tokenizer():
    tokenizer = fit_wordpiece_tokenizer(["a small corpus of words"] * 4, vocab_size=40)
    cls, sep = tokenizer.cls_token_id, tokenizer.sep_token_id
    assert get_family("segment_lm").token_settings(tokenizer) == {"cls_token_id": cls, "sep_token_id": sep}
    assert get_family("sparse_longformer").token_settings(tokenizer) == {
        "bos_token_id": cls, "eos_token_id": sep, "sep_token_id": sep}
    assert get_family("slstm").token_settings(tokenizer) == {}


def test_every_verb_is_a_command_module_with_a_parser_and_a_run():
    verbs = {command.__name__.rsplit(".", 1)[-1] for command in COMMANDS}
    assert verbs == {"train", "evaluate", "predict", "serve", "demo", "bench", "compare", "push", "attention_map",
                     "export"}
    for command in COMMANDS:
        assert callable(command.add_parser) and callable(command.run)


def _subparsers(parser):
    import argparse

    action = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
    return action.choices


def test_every_flag_shows_its_default_in_help():
    missing = []
    for verb, parser in _subparsers(build_parser()).items():
        text = "".join(parser.format_help().split())  # argparse wraps long defaults, even inside a word
        for action in parser._actions:
            default = getattr(action, "field_default", action.default)  # a settings field's flag: the field's
            if (not action.option_strings or default in (None, False, "", {}, argparse.SUPPRESS)
                    or action.dest == "help"):
                continue
            if action.nargs == 0:  # a switch (--public): its default is its absence, which help says in words
                continue
            if "".join(f"(default: {default})".split()) not in text:
                missing.append(f"{verb} {action.option_strings[0]}")
    assert not missing, missing


def _help(verb):
    return " ".join(_subparsers(build_parser())[verb].format_help().split())


def test_help_lists_come_from_the_catalog_which_matches_the_registry():
    """A help that lists families is built from `catalog` (which imports no model code, so --help answers at once),
    and the catalog agrees with the registry: its names and order, the families that take a backbone, each family's
    variants, runtime settings and evidence: `train --model`, `predict --explain`, `attention-map`'s models and
    selectors."""
    from hf_longdoc.inference.explaining import explainable_families
    from hf_longdoc.utils import catalog

    assert catalog.FAMILY_NAMES == tuple(FAMILIES)
    assert catalog.BACKBONE_FAMILIES == tuple(name for name, family in FAMILIES.items() if family.supports_backbones)
    assert catalog.VARIANTS == {name: family.variants for name, family in FAMILIES.items()}
    assert catalog.RUNTIME_SETTINGS == {name: family.runtime_settings for name, family in FAMILIES.items()
                                        if family.runtime_settings}
    assert set(catalog.EVIDENCE_WEIGHTS) == set(explainable_families())
    assert f"the family to train: {', '.join(FAMILIES)}" in _help("train")
    assert all(f"{name}: " in _help("predict") for name in explainable_families())  # what each one's weight means
    mapped = [family for family in FAMILIES.values() if "global_selector" in family.variants]
    assert mapped, "no family chooses global tokens"
    attention_help = _help("attention-map")
    assert f"a saved model of {' or '.join(family.name for family in mapped)} with" in attention_help
    for selector in mapped[0].variants["global_selector"]:
        assert selector in attention_help


def test_every_module_opens_with_a_docstring():
    for path in SRC.rglob("*.py"):
        docstring = ast.get_docstring(ast.parse(path.read_text()))
        assert docstring, f"{path.relative_to(SRC)} has no module docstring"


def test_each_family_registers_itself_from_its_own_folder():
    """A family is one folder: its `family.py` registers it, the registry imports no family, and the folder is named
    after the family (the thesis' two families share `sparse_longformer/`, whose selection code they both use)."""
    registry = (SRC / "modeling/registry.py").read_text()
    folders = {path.parent.name for path in (SRC / "modeling").glob("*/family.py")}
    imported = [node.module for node in ast.walk(ast.parse(registry)) if isinstance(node, ast.ImportFrom)
                and node.level == 1 and (node.module or "").split(".")[0] in folders]
    assert not imported, f"registry.py imports family internals: {imported}"
    for family in FAMILIES.values():
        module = family.config_class.__module__.rsplit(".", 1)[0]
        folder = SRC / pathlib.Path(*module.split(".")[1:])
        assert "register_family(" in (folder / "family.py").read_text()
        assert folder.name in (family.name, "sparse_longformer"), f"{family.name} lives in {folder.name}/"
        assert "family" not in {p.stem for p in folder.glob("*.py") if p.stem.startswith(("modeling", "config"))}


def test_trains_small_model_comes_from_from_size():
    """`from_size` is the one source of a model of a given size: `train`'s default model is the family's `train_size`
    through it (with the family's policy `defaults`), never a second set of sizes."""
    for family in FAMILIES.values():
        assert not set(family.defaults) & {"hidden_size", "num_hidden_layers", "num_recurrent_steps", "rank"}
        if family.train_size is not None:
            expected = family.config_class.from_size(**family.size_arguments(family.train_size), **family.defaults)
            assert family.build_config().to_dict() == expected.to_dict()


# What a shipped file must not cite: the tracker's issues and pull requests, and the work sessions and stops that made
# the code; a reader of a saved model has none of them. A measurement is cited by the URL of its section of
# docs/results.md (`DOCS_URL`), whatever words the section's heading holds.
DOCS_URL = re.compile(r"https://github\.com/hf-longdoc/hf_longdoc/blob/main/docs/[\w-]+\.md#[\w-]+")
INTERNAL_REFERENCE = re.compile(r"\b(?:issues?|pull requests?|PRs?)\s*#?\d+|(?<![\w&/#])#\d+\b|\bthe issue's\b|"
                                r"\bsessions?\b|\bstops?\s*#?\d+", re.IGNORECASE)
SHIPPED = sorted(path for pattern in ("modeling/*/*.py", "tokenization/*.py") for path in SRC.glob(pattern)
                 if path.name != "__init__.py")  # what `save_pretrained` copies beside a model and `push` uploads


def internal_references(text):
    """(line, text) of each citation in `text` that only the project's own people can open (`INTERNAL_REFERENCE`)."""
    return [(number, match.group()) for number, line in enumerate(text.splitlines(), start=1)
            for match in INTERNAL_REFERENCE.finditer(DOCS_URL.sub("", line))]


def test_shipped_files_cite_what_a_user_can_open():
    """Modeling files ship to the Hub with every saved model: they cite papers by arXiv, DOI or URL, a section of the
    docs, or a measurement, never the project's own notes, issues or work sessions, which no user has."""
    for path in SRC.rglob("*.py"):
        text = path.read_text()
        for unreadable in ("shared/papers", "DESIGN.md", "../shared"):
            assert unreadable not in text, f"{path.relative_to(SRC)} cites {unreadable}"
    assert SHIPPED
    found = [f"{path.relative_to(SRC)}:{line}: {hit!r}" for path in SHIPPED
             for line, hit in internal_references(path.read_text())]
    assert not found, "cite the paper, the docs section or the measurement instead:\n" + "\n".join(found)


@pytest.mark.parametrize(("text", "caught"), [
    ("# 142 ms instead of 121 ms: issue 53", True),
    ("(see #53)", True),
    ("Issues 12 and 14 measured it", True),
    ("fixed in PR 7", True),
    ('docs/results.md, "third session"', True),
    ("as in the last GPU sessions", True),
    ("since stop 3 the mask is cached", True),
    ("the issue's goals", True),
    ("Eq. (4): sentence-node update; thesis 5.4.2, Table 2, Fig. 5.2", False),
    ('docs/results.md, "Sparse attention and the S-LSTM on a GPU"', False),
    ("measured: https://github.com/hf-longdoc/hf_longdoc/blob/main/docs/results.md#a-gpu-second-session", False),
    ("results.md#on-a-gpu-second-session-2026", True),
    ("x = x.view(b, u, v * c)  # (b, u, w); a numerical issue; stop-gradient copy; stops at the end", False),
    ("https://openreview.net/forum?id=ryxW804FPH#5 and &#39;", False),
])
def test_the_citation_check_catches_internal_references(text, caught):
    assert bool(internal_references(text)) == caught


FAMILY_FOLDERS = sorted(path.parent.name for path in (SRC / "modeling").glob("*/family.py"))
# The package's floors, top to bottom: a module imports only from a floor below its own, or from inside its own unit
# (a top-level module, a subpackage such as `experiments`, or one family's folder). "" is the package itself (its
# `__init__`, the public API). Each family folder is a unit of its own on one floor, so no family imports another.
FLOORS = [
    {"__main__"},
    {"", "cli"},
    {"commands"},
    {"serving"},  # the model behind HTTP: predict's reader, batched across clients
    {"engines"},  # predict's reading in Ray's and Spark's workers, and `predict --engine` around them
    {"experiments", "predicting"},
    {"training"},  # the settings, the recipe every training follows, the run, the head stage, evaluate
    {"publishing"},  # model cards and the upload
    {"metrics"},
    {"inference"},  # how a saved model is read: its rules, the one reader, explanations, the pipeline, the graphs
    {"saving"},  # run folders, and the saved models read back
    {"modeling"},  # modeling/__init__: imports every family, so that each registers itself
    {f"modeling.{folder}" for folder in FAMILY_FOLDERS},
    {"modeling.registry"},
    {"modeling.backbones"},  # what families read from a checkpoint; no family imports another for it
    {"data"},
    {"utils"},  # the ground floor: imports nothing of ours outside it
]
FLOOR = {unit: number for number, units in enumerate(FLOORS) for unit in units}


def _module_name(path):
    """The dotted name of the module at `path` inside the package ("" for the package's `__init__`)."""
    parts = list(path.relative_to(SRC).with_suffix("").parts)
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def unit_of(module):
    """The unit of a dotted module name: the longest key of `FLOOR` that is the name or a package above it; None for
    a module that has no floor."""
    parts = module.split(".") if module else []
    for cut in range(len(parts), 0, -1):
        if ".".join(parts[:cut]) in FLOOR:
            return ".".join(parts[:cut])
    return "" if not module else None


def imported_modules(path, source):
    """The dotted names (inside the package) of what `source`, the text of the module at `path`, imports of ours:
    relative imports resolved, `hf_longdoc...` absolute ones stripped; function-level imports included."""
    module = _module_name(path)
    package = module.split(".") if path.name == "__init__.py" else module.split(".")[:-1]
    package = [part for part in package if part]
    found = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.ImportFrom) and node.level:
            base = package[:len(package) - node.level + 1]
            targets = [node.module] if node.module else [alias.name for alias in node.names]
            found += [".".join(base + [target]) for target in targets]
        elif isinstance(node, ast.ImportFrom) and (node.module or "").split(".")[0] == "hf_longdoc":
            found.append(node.module.partition(".")[2])
        elif isinstance(node, ast.Import):
            found += [alias.name.partition(".")[2] for alias in node.names if alias.name.split(".")[0] == "hf_longdoc"]
    return found


def layering_problems(path, source):
    """Each import of `source` (the module at `path`) that goes up a floor or sideways into another unit, and each
    module of the two that has no floor."""
    unit = unit_of(_module_name(path))
    if unit is None:
        return [f"{path.relative_to(SRC)} has no floor: add it to FLOORS"]
    problems = []
    for target in imported_modules(path, source):
        target_unit = unit_of(target)
        if target_unit is None:
            problems.append(f"{path.relative_to(SRC)} imports {target}, which has no floor: add it to FLOORS")
        elif target_unit != unit and FLOOR[target_unit] <= FLOOR[unit]:
            problems.append(f"{path.relative_to(SRC)} imports {'.'.join(['hf_longdoc', target]).rstrip('.')} "
                            f"({target_unit!r} is not below {unit!r})")
    return problems


def test_every_module_has_a_floor_and_imports_only_below_it():
    """__main__ -> cli -> commands -> experiments -> training -> run_settings -> hub, head fitting, export ->
    pipelines, saved models, metrics -> reading -> modeling -> each family -> registry -> backbones -> data,
    tokenization -> outputs -> numbers, plotting."""
    problems = [problem for path in sorted(SRC.rglob("*.py")) for problem in layering_problems(path, path.read_text())]
    assert not problems, "\n".join(problems)


@pytest.mark.parametrize(("module", "source"), [
    ("modeling/sparse_longformer/family.py", "from ..segment_lm.modeling_segment import declared_pooling"),
    ("modeling/slstm/modeling_slstm.py", "from hf_longdoc.modeling.contextualizer import ContextualizerConfig"),
    ("inference/attention_map.py", "from ..experiments.report import figure"),
    ("utils/plotting.py", "def draw():\n    from ..saving.run_folder import record_outputs"),
    ("modeling/registry.py", "from .slstm.family import SLSTMFamily"),
    ("saving/saved_models.py", "import hf_longdoc"),
    ("inference/pipelines.py", "from ..a_new_module import helper"),
    ("a_new_module.py", ""),
])
def test_the_layering_check_catches_each_kind_of_crossing(module, source):
    """A family importing another, a module importing a floor above it (the package itself included), and a module
    with no floor all fail."""
    assert layering_problems(SRC / module, source)


def import_graph(sources):
    """What each module imports of ours, `sources` mapping each module's path to its text: the dotted names of the
    modules it names (a name that is not a module, such as `from . import helper`, stands for its package), imports
    inside functions included, since a cycle that only a late import keeps from failing is still a cycle."""
    modules = {_module_name(path) for path in sources}

    def module_of(name):
        parts = name.split(".") if name else []
        return next(".".join(parts[:cut]) for cut in range(len(parts), -1, -1) if ".".join(parts[:cut]) in modules)

    graph = {}
    for path, source in sources.items():
        module = _module_name(path)
        graph[module] = sorted({module_of(target) for target in imported_modules(path, source)} - {module})
    return graph


def import_cycles(graph):
    """The cycles in `graph` (module -> the modules it imports), each as the list of its modules, the first repeated:
    every import that leads back to a module still on the depth-first path closes one. Each cycle is listed once,
    rotated to start at its smallest name."""
    cycles, finished, path = set(), set(), []

    def visit(module):
        path.append(module)
        for target in graph.get(module, ()):
            if target in path:
                cycle = path[path.index(target):]
                first = cycle.index(min(cycle))
                cycles.add(tuple(cycle[first:] + cycle[:first]))
            elif target not in finished:
                visit(target)
        path.pop()
        finished.add(module)

    for module in sorted(graph):
        if module not in finished:
            visit(module)
    return [[*cycle, cycle[0]] for cycle in sorted(cycles)]


def _named(module):
    return ".".join(["hf_longdoc", module]).rstrip(".")


def test_no_import_cycle_between_our_modules():
    """Imports between modules of ours form no cycle, counting imports inside functions: what two modules both need
    moves down to one of them, or to a small module of its own (as `data.errors` holds `DatasetError` for both
    `data.loading` and `data.folders`)."""
    cycles = import_cycles(import_graph({path: path.read_text() for path in sorted(SRC.rglob("*.py"))}))
    assert not cycles, "import cycles:\n" + "\n".join(" -> ".join(map(_named, cycle)) for cycle in cycles)


@pytest.mark.parametrize("edits", [
    {"data/folders.py": "from .loading import DatasetError",
     "data/loading.py": "def read(path):\n    from .folders import load_labelled_folder"},
    {"data/folders.py": "from . import loading", "data/loading.py": "from .tasks import tokenize",
     "data/tasks.py": "import hf_longdoc.data.folders"},
])
def test_the_cycle_check_catches_a_cycle_and_names_it(edits):
    """Two modules importing each other (one of them inside a function) and a cycle through three, each named."""
    sources = {path: path.read_text() for path in sorted(SRC.rglob("*.py"))}
    sources.update({SRC / module: source for module, source in edits.items()})
    cycles = import_cycles(import_graph(sources))
    named = {_module_name(SRC / module) for module in edits}
    assert [cycle for cycle in cycles if set(cycle) == named], cycles


def test_no_family_folder_imports_another_family():
    """Each family folder is self-contained, as the Hub rule needs for its shipped files and the registry for its
    entry: what two families share lives outside both (`modeling/backbones.py`), or as a marked copy."""
    crossings = []
    for folder in FAMILY_FOLDERS:
        for path in sorted((SRC / "modeling" / folder).glob("*.py")):
            others = {f"modeling.{other}" for other in FAMILY_FOLDERS if other != folder}
            crossings += [f"{path.relative_to(SRC)} imports {target}"
                          for target in imported_modules(path, path.read_text()) if unit_of(target) in others]
    assert not crossings, "\n".join(crossings)


def test_the_plotting_helper_is_on_the_ground_floor():
    """`attention_map` draws through `plotting.figure`, which imports nothing of ours, not through `experiments`."""
    assert not imported_modules(SRC / "utils/plotting.py", (SRC / "utils/plotting.py").read_text())
    attention_map = SRC / "inference/attention_map.py"
    assert not [target for target in imported_modules(attention_map, attention_map.read_text())
                if unit_of(target) == "experiments"]


def test_train_defaults_never_overrule_a_users_setting():
    """The S-LSTM's train default once used the standard name `num_hidden_layers`, which silently overruled a user's
    (and compare's) `num_recurrent_steps`: compare's S-LSTM ran 4 steps whatever `--num-layers` said."""
    slstm = get_family("slstm")
    assert slstm.build_config(num_recurrent_steps=6).num_recurrent_steps == 6
    assert slstm.build_config(num_hidden_layers=6).num_recurrent_steps == 6
    assert slstm.build_config(SIZE).num_recurrent_steps == SIZE["num_layers"]
    assert slstm.build_config(SIZE, num_hidden_layers=5).num_recurrent_steps == 5
    assert slstm.build_config(SIZE, num_recurrent_steps=5).num_recurrent_steps == 5


def test_a_misspelled_setting_is_an_error_not_a_silent_no_op():
    with pytest.raises(ValueError, match="hidden_sise"):
        get_family("contextualizer").build_config(hidden_sise=64)
    with pytest.raises(ValueError, match="num_global_tokenz"):
        get_family("sparse_longformer").build_config(SIZE, num_global_tokenz=8)
