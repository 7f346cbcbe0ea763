"""docs/development.md stays true: its layer table names every room of the package, and every registered family has
done each step of its numbered "add a family" checklist."""

import ast
import inspect
import re
from pathlib import Path

import pytest

import hf_longdoc
from families import FAMILY_CASES
from hf_longdoc import FAMILIES
from hf_longdoc.utils import catalog

ROOT = Path(__file__).resolve().parent.parent
SRC = ROOT / "src" / "hf_longdoc"
GUIDE = (ROOT / "docs" / "development.md").read_text(encoding="utf-8")


def checklist():
    """The numbered steps of the guide's "Add a family" section."""
    section = GUIDE.split("## Add a family", 1)[1].split("\n## ", 1)[0]
    return re.findall(r"^\d+\. ", section, flags=re.M)


def folder_of(family):
    return Path(inspect.getfile(family.config_class)).parent


def test_the_checklist_has_the_steps_this_test_checks():
    assert len(checklist()) == 7


def test_the_layer_table_names_every_room():
    rooms = {path.name for path in SRC.iterdir() if path.is_dir() and (path / "__init__.py").exists()}
    table = GUIDE.split("## The layers", 1)[1].split("\n## ", 1)[0]
    assert not [room for room in rooms if f"`{room}/`" not in table], "add the room to docs/development.md"
    flat = {path.name for path in SRC.glob("*.py")} - {"__init__.py"}
    assert flat == {"cli.py", "__main__.py"}, "a module of its own at the top belongs in a room"


@pytest.mark.parametrize("name", list(FAMILIES))
def test_every_family_has_done_every_step(name):
    family = FAMILIES[name]
    folder = folder_of(family)
    # 1: the folder, its configuration and modeling modules, self-contained
    assert folder.parent == SRC / "modeling" and (folder / "__init__.py").exists()
    config_file = Path(inspect.getfile(family.config_class))
    assert config_file.name.startswith("configuration_")
    modeling = [path for path in folder.glob("modeling_*.py")]
    assert modeling
    for path in [config_file, *modeling]:
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.ImportFrom):
                assert node.level <= 1 and not (node.module or "").startswith("hf_longdoc"), (path, node.module)
    # 2: the registry entry in family.py
    assert Path(inspect.getfile(type(family))) == folder / "family.py"
    # 3: imported once in modeling/__init__.py
    assert f"from .{folder.name} import family" in (SRC / "modeling" / "__init__.py").read_text(encoding="utf-8")
    # 4: the catalog
    assert name in catalog.FAMILY_NAMES and name in catalog.VARIANTS
    assert (name in catalog.BACKBONE_FAMILIES) == family.supports_backbones
    # 5: the public classes
    assert getattr(hf_longdoc, family.config_class.__name__) is family.config_class
    assert family.config_class.__name__ in hf_longdoc.__all__
    # 6: a conformance entry and a test file of its own (the folder's: a folder may hold two families)
    assert name in {case.family for case in FAMILY_CASES}
    assert list((ROOT / "tests").glob(f"test_{name}.py")) or list((ROOT / "tests").glob(f"test_{folder.name}.py"))
    # 7: docs/models.md
    assert f"`{name}`" in (ROOT / "docs" / "models.md").read_text(encoding="utf-8")
