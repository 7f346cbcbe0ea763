"""`run_bench` takes one `BenchSettings`, checked before any model is built; `hf-longdoc bench` only builds it, and
imports nothing heavy until it runs."""

import ast
import pathlib

import pytest

import hf_longdoc
from hf_longdoc.experiments.baselines import BASELINES, check_attention
from hf_longdoc.experiments.bench import run_bench, summary_lines
from hf_longdoc.experiments.settings import BenchSettings
from hf_longdoc.utils.catalog import ATTENTION_IMPLEMENTATIONS, BASELINE_NAMES

SRC = pathlib.Path(hf_longdoc.__file__).parent
TINY = dict(models=("contextualizer",), lengths=(32,), hidden_size=16, num_layers=1, num_heads=2, repeats=1,
            warmup=0, device="cpu", roofline=False)
HEAVY = ("torch", "transformers", "datasets", "tokenizers", "sklearn")


def test_the_baseline_names_are_the_baselines():
    assert BASELINE_NAMES == tuple(BASELINES)
    with pytest.raises(ValueError, match="flex_attention"):
        check_attention("flash", "cpu")
    assert "flex_attention" in ATTENTION_IMPLEMENTATIONS


def test_a_settings_object_and_keywords_run_the_same_bench(tmp_path):
    settings = BenchSettings(**TINY, output=str(tmp_path / "bench"))
    (row,) = run_bench(settings, progress=lambda line: None)
    assert row["model"] == "contextualizer" and row["seconds"] > 0
    assert (tmp_path / "bench.csv").exists() and (tmp_path / "bench.png").exists()
    (again,) = run_bench(progress=lambda line: None, **TINY)  # keywords: no output, nothing written
    assert again.keys() == row.keys()
    lines = summary_lines(settings, [row])
    assert lines[0].startswith("hidden_size=16 layers=1 heads=2 batch=1") and any("Wrote" in line for line in lines)


@pytest.mark.parametrize(("changes", "message"), [
    ({"repeats": 0}, "--repeats"),
    ({"dtype": "float64"}, "--dtype"),
    ({"roofline_length": 99}, "--roofline-length"),
    ({"models": ()}, "at least one model"),
    ({"output": "."}, "--output"),
])
def test_settings_no_run_can_use_fail_before_any_model_is_built(changes, message):
    with pytest.raises(ValueError, match=message):
        BenchSettings(**{**TINY, **changes}).check()


def test_an_unknown_setting_is_a_type_error_naming_the_fields():
    with pytest.raises(TypeError, match="lenghts"):
        run_bench(lenghts=(64,))


def _top_level_imports(path):
    """The modules `path` imports when it is imported (not inside functions): ours as dotted names under
    `hf_longdoc`, others by their top-level name."""
    module = path.relative_to(SRC).with_suffix("").parts
    package = list(module[:-1])
    ours, others = [], []
    for node in ast.parse(path.read_text()).body:
        if isinstance(node, ast.ImportFrom) and node.level:
            base = package[:len(package) - node.level + 1]
            ours += [".".join(base + [node.module] if node.module else base + [alias.name]) for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            others.append(node.module.split(".")[0])
        elif isinstance(node, ast.Import):
            others += [alias.name.split(".")[0] for alias in node.names]
    return ours, others


def test_the_bench_command_imports_nothing_heavy_until_it_runs():
    """What importing `commands/bench.py` imports of ours, followed module by module (the package `__init__`s
    aside), imports neither torch nor Transformers nor the model code: `hf-longdoc bench --help` answers at once."""
    seen, heavy, todo = set(), [], ["commands.bench"]
    while todo:
        name = todo.pop()
        path = SRC / (name.replace(".", "/") + ".py")
        if name in seen or not path.exists():  # a package, or a name inside a module
            continue
        seen.add(name)
        ours, others = _top_level_imports(path)
        heavy += [f"{name} imports {other}" for other in others if other in HEAVY]
        heavy += [f"{name} imports {target}" for target in ours if target.split(".")[0] == "modeling"]
        todo += ours + [target.rpartition(".")[0] for target in ours]
    assert "utils.catalog" in seen
    assert not heavy, heavy
