"""The Hub rule makes every family folder self-contained, so a few helpers are repeated across families. Each repeated
copy carries `# Copied from hf_longdoc.<module>.<name>` on the line above its `def`/`class`, naming one original (as
Transformers marks its copies and checks them with `utils/check_copies.py`); these tests fail when a copy drifts."""

import ast
import importlib
import re
import textwrap
from pathlib import Path

import hf_longdoc

PACKAGE = Path(hf_longdoc.__file__).parent
MARKER = re.compile(r"^\s*# Copied from (hf_longdoc(?:\.\w+)+)\s*$")

CONTEXTUALIZER = "hf_longdoc.modeling.contextualizer.modeling_contextualizer."
# the copies that must exist (more may): original -> files holding a marked copy, relative to the package
EXPECTED_COPIES = {
    "hf_longdoc.modeling.contextualizer.configuration_contextualizer.ContextualizerConfig.from_dict": {
        "modeling/elementwise/configuration_elementwise.py",
        "modeling/segment_lm/configuration_segment.py",
        "modeling/slstm/configuration_slstm.py",
        "modeling/sparse_longformer/configuration_sparse_longformer.py",
    },
    # the shared end of every config's `__init__`: the multi-label threshold, auto_map, Transformers' settings
    "hf_longdoc.modeling.contextualizer.configuration_contextualizer.ContextualizerConfig._finish_init": {
        "modeling/elementwise/configuration_elementwise.py",
        "modeling/segment_lm/configuration_segment.py",
        "modeling/slstm/configuration_slstm.py",
        "modeling/sparse_longformer/configuration_sparse_longformer.py",
        "modeling/sparse_longformer/configuration_sparse_bigbird.py",
    },
    CONTEXTUALIZER + "check_labels": {
        "modeling/elementwise/modeling_elementwise.py",
        "modeling/segment_lm/modeling_segment.py",
        "modeling/slstm/modeling_slstm.py",
        "modeling/sparse_longformer/modeling_sparse_longformer.py",
    },
    CONTEXTUALIZER + "real_token_mask": {
        "modeling/slstm/modeling_slstm.py",
        "modeling/sparse_longformer/modeling_sparse_longformer.py",
    },
    CONTEXTUALIZER + "check_vocabulary_range": {
        "modeling/slstm/modeling_slstm.py",
        "modeling/sparse_longformer/modeling_sparse_longformer.py",
    },
    # a saved model reads the length it was trained to read, cut as the tokenizer's truncation=True cuts it
    "hf_longdoc.modeling.sparse_longformer.modeling_sparse_longformer.keep_what_the_model_reads": {
        "modeling/contextualizer/modeling_contextualizer.py",
        "modeling/elementwise/modeling_elementwise.py",
        "modeling/segment_lm/modeling_segment.py",
        "modeling/slstm/modeling_slstm.py",
    },
    "hf_longdoc.modeling.sparse_longformer.modeling_sparse_longformer.check_right_padded": {
        "modeling/elementwise/modeling_elementwise.py",
        "modeling/segment_lm/modeling_segment.py",
    },
    # the segment LM's tokenizer finds sentences as the explanations do (its file travels to the Hub alone)
    "hf_longdoc.utils.sentences.sentence_spans": {"modeling/segment_lm/tokenization_segment.py"},
    # the model cuts a whole text given to it as its tokenizer's truncation=True cuts it (the head + tail window)
    "hf_longdoc.modeling.segment_lm.tokenization_segment.kept_positions": {"modeling/segment_lm/modeling_segment.py"},
    # the package-side originals of what the families read from a checkpoint (no family imports another)
    "hf_longdoc.modeling.backbones.backbone_positions": {
        "modeling/elementwise/configuration_elementwise.py",
        "modeling/segment_lm/configuration_segment.py",
    },
    "hf_longdoc.modeling.backbones.declared_pooling": {
        "modeling/segment_lm/modeling_segment.py",
    },
    "hf_longdoc.modeling.backbones.sentence_transformers_file": {
        "modeling/segment_lm/modeling_segment.py",
    },
    "hf_longdoc.modeling.elementwise.configuration_elementwise.backbone_with_sizes": {
        "modeling/segment_lm/configuration_segment.py",
    },
    "hf_longdoc.modeling.elementwise.configuration_elementwise.backbone_config_from": {
        "modeling/segment_lm/configuration_segment.py",
    },
}


def _definitions(tree):
    """Every function and class of a module, at any depth, with its qualified name (`Class.method`)."""
    found = []

    def visit(node, prefix):
        for child in ast.iter_child_nodes(node):
            if isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
                found.append((prefix + child.name, child))
                visit(child, prefix + child.name + ".")

    visit(tree, "")
    return found


def _first_line(node):
    return min([node.lineno] + [decorator.lineno for decorator in node.decorator_list])


def _code(lines, node):
    """The definition's text, decorators included, dedented (so a copied method compares with a function)."""
    return textwrap.dedent("\n".join(lines[_first_line(node) - 1: node.end_lineno]))


def copies_in(source):
    """[(marker line, original's dotted name, the marked node or None)] for every `# Copied from` marker."""
    by_first_line = {_first_line(node): node for _, node in _definitions(ast.parse(source))}
    return [(number, match.group(1), by_first_line.get(number + 1))
            for number, line in enumerate(source.splitlines(), start=1) if (match := MARKER.match(line))]


def original_code(dotted):
    """(file, text) of the definition `dotted` names: the longest importable prefix is the module, the rest the
    (possibly nested) name in it. Raises LookupError when there is none."""
    parts = dotted.split(".")
    for cut in range(len(parts) - 1, 0, -1):
        try:
            module = importlib.import_module(".".join(parts[:cut]))
        except ImportError:
            continue
        path = Path(module.__file__)
        source = path.read_text(encoding="utf-8")
        name = ".".join(parts[cut:])
        for qualified, node in _definitions(ast.parse(source)):
            if qualified == name:
                return path, _code(source.splitlines(), node)
        raise LookupError(f"`{dotted}`: {path} defines no `{name}`")
    raise LookupError(f"`{dotted}`: no importable module in it")


def check_copies(source, path):
    """The problems with the marked copies in `source` (the text of the file at `path`): a marker not directly above
    a `def`/`class`, an original that does not exist, or a copy whose text differs from its original's."""
    lines = source.splitlines()
    problems = []
    for number, dotted, node in copies_in(source):
        if node is None:
            problems.append(f"{path}:{number}: `# Copied from {dotted}` is not directly above a def or class.")
            continue
        try:
            original_path, original = original_code(dotted)
        except LookupError as error:
            problems.append(f"{path}:{number}: the original of this copy is missing: {error}.")
            continue
        if _code(lines, node) != original:
            problems.append(f"{path}:{node.lineno}: `{node.name}` differs from its original `{dotted}` in "
                            f"{original_path}; make the copy identical again (or drop the marker if it must differ).")
    return problems


def _package_files():
    return sorted(PACKAGE.rglob("*.py"))


def test_copies_match_their_originals():
    problems = [problem for path in _package_files()
                for problem in check_copies(path.read_text(encoding="utf-8"), path)]
    assert not problems, "\n".join(problems)


def test_expected_copies_are_marked():
    found = {}
    for path in _package_files():
        for _, dotted, node in copies_in(path.read_text(encoding="utf-8")):
            if node is not None:
                found.setdefault(dotted, set()).add(path.relative_to(PACKAGE).as_posix())
    for dotted, files in EXPECTED_COPIES.items():
        marked = found.get(dotted, set())
        assert files <= marked, f"no `# Copied from {dotted}` in {sorted(files - marked)}"
        original_file = "/".join(dotted.split(".")[1:-1]) + ".py"
        assert original_file not in marked, f"the original of {dotted} marks itself a copy"


def test_check_copies_reports_drift():
    path = PACKAGE / "modeling/segment_lm/modeling_segment.py"
    source = path.read_text(encoding="utf-8")
    assert check_copies(source, path) == []
    drifted = source.replace("(`config.num_labels`)", "(`num_labels`)")
    assert drifted != source
    problems = check_copies(drifted, path)
    assert len(problems) == 1, problems
    assert "`check_labels` differs" in problems[0] and "modeling_contextualizer.py" in problems[0]


def test_check_copies_reports_bad_markers():
    marker = "# Copied from " + CONTEXTUALIZER
    missing = marker + "no_such_helper\ndef f():\n    pass\n"
    assert "original of this copy is missing" in check_copies(missing, "x.py")[0]
    stray = marker + "check_labels\n\nx = 1\n"
    assert "not directly above a def or class" in check_copies(stray, "x.py")[0]
