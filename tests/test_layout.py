"""The package's shape: rooms a newcomer can find, small files, one settings object, design inside the repository."""

import ast
import importlib
import pkgutil
import re
from collections import Counter
from pathlib import Path

import scheduler

PROJECT = Path(__file__).resolve().parent.parent
PACKAGE = PROJECT / "scheduler"


def _module_names() -> list[str]:
    return [info.name for info in pkgutil.walk_packages(scheduler.__path__, "scheduler.")
            if ".migrations.0" not in info.name]


def _python_files():
    return [path for path in PACKAGE.rglob("*.py") if "migrations" not in path.parts]


def test_every_module_imports_and_no_name_exists_twice():
    names = _module_names()
    for name in names:
        importlib.import_module(name)
    twice = {leaf: count for leaf, count in Counter(name.rsplit(".", 1)[-1] for name in names).items() if count > 1}
    assert twice == {}, f"module names used twice: {twice}"


def test_no_import_renames_a_scheduler_module():
    pattern = re.compile(r"^\s*(from scheduler[\w.]* )?import scheduler[\w.]* as |^\s*from scheduler[\w.]* import \w+ as ", re.M)
    offenders = [str(path.relative_to(PROJECT)) for path in _python_files() if pattern.search(path.read_text())]
    assert offenders == []


def test_files_stay_small_and_functions_short():
    too_long = [(str(path.relative_to(PROJECT)), count) for path in list(_python_files()) + list(PACKAGE.glob("sql/*.sql"))
                if (count := len(path.read_text().splitlines())) > 300]
    assert too_long == [], "files over 300 lines"
    long_functions = []
    for path in _python_files():
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) and node.end_lineno - node.lineno >= 60:
                long_functions.append(f"{path.relative_to(PROJECT)}:{node.name}")
    assert long_functions == [], "functions over 60 lines"


def test_only_the_settings_object_reads_scheduler_settings():
    reads = re.compile(r"settings\.SCHEDULER_[A-Z_]+")
    offenders = [str(path.relative_to(PROJECT)) for path in _python_files()
                 if path.name != "conf.py" and reads.search(path.read_text())]
    assert offenders == []


def test_the_design_lives_in_the_repository():
    """No document or comment points outside the repository: a clone has no shared/ beside it."""
    places = [PROJECT / "README.md", *(PROJECT / "docs").rglob("*.md"), *PACKAGE.rglob("*.py"), *PACKAGE.rglob("*.sql")]
    offenders = [str(path.relative_to(PROJECT)) for path in places if "shared/" in path.read_text()]
    assert offenders == []


def test_requirement_ids_in_the_code_are_defined_in_the_docs():
    defined = set(re.findall(r"\*\*([A-Z]{2,4}-\d+)\*\*", (PROJECT / "docs" / "requirements.md").read_text()))
    cited = set()
    for path in [*PACKAGE.rglob("*.py"), *PACKAGE.rglob("*.sql")]:
        cited |= set(re.findall(r"\b(SCH|ADM|RUN|TRM|SWP|OBX|CLN|BIL|RCP|FSH|SCD|RET|TSK|PRV|APP|WAIT|HA)-(\d+)\b", path.read_text()))
    missing = sorted(f"{family}-{number}" for family, number in cited if f"{family}-{number}" not in defined)
    assert missing == []


def _cited_requirements(text: str) -> set[str]:
    """The ids a text names, with ranges (`TRM-1..5`) and lists (`SWP-3/5/7`) spelled out."""
    cited = set()
    for family, first, rest in re.findall(r"\b(SCH|ADM|RUN|TRM|SWP|OBX|CLN|BIL|RCP|FSH|SCD|RET|TSK|PRV|APP|WAIT|HA)-(\d+)((?:(?:\.\.|/)\d+)*)", text):
        numbers = [int(first)]
        for separator, number in re.findall(r"(\.\.|/)(\d+)", rest):
            numbers += range(numbers[-1] + 1, int(number) + 1) if separator == ".." else [int(number)]
        cited |= {f"{family}-{number}" for number in numbers}
    return cited


def _marked_requirements() -> dict[str, list[str]]:
    """{id: [test, ...]} from every `@pytest.mark.requirement(...)` on a test function under tests/."""
    marked: dict[str, list[str]] = {}
    for path in (PROJECT / "tests").rglob("test_*.py"):
        if "node_modules" in path.parts:
            continue
        for node in ast.walk(ast.parse(path.read_text())):
            if not isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) or not node.name.startswith("test"):
                continue
            for decorator in node.decorator_list:
                if isinstance(decorator, ast.Call) and ast.unparse(decorator.func) == "pytest.mark.requirement":
                    for argument in decorator.args:
                        for requirement in _cited_requirements(ast.literal_eval(argument)):
                            marked.setdefault(requirement, []).append(f"{path.relative_to(PROJECT)}::{node.name}")
    return marked


def test_every_requirement_is_shown_by_a_test_marked_with_it():
    """Each requirement has a test marked `@pytest.mark.requirement("ID")`, the test that fails when the
    requirement's behaviour is removed (a reviewer starts from the id); a mention in a docstring counts for nothing.
    A mark, or a mention, names only real ids."""
    defined = re.findall(r"\*\*([A-Z]{2,4}-\d+)\*\*", (PROJECT / "docs" / "requirements.md").read_text())
    marked = _marked_requirements()
    assert [requirement for requirement in defined if requirement not in marked] == []
    mentioned = set()
    for path in [*(PROJECT / "tests").rglob("*.py"), *(PROJECT / "tests").rglob("*.sql")]:
        if "node_modules" not in path.parts:
            mentioned |= _cited_requirements(path.read_text())
    assert sorted((mentioned | set(marked)) - set(defined)) == []


def test_every_file_the_docs_link_is_in_the_repository():
    """A clone shows what the README and docs link to (the benchmark plot once lived in an ignored folder)."""
    import subprocess

    tracked = set(subprocess.run(["git", "ls-files"], cwd=PROJECT, capture_output=True, text=True,
                                 check=True).stdout.splitlines())
    missing = []
    for page in [PROJECT / "README.md", *(PROJECT / "docs").glob("*.md")]:
        for target in re.findall(r"\]\(([^)#\s]+)(?:#[^)]*)?\)", page.read_text()):
            if "://" in target or target.startswith("mailto:"):
                continue
            path = (page.parent / target).resolve().relative_to(PROJECT)
            if str(path) not in tracked and not any(name.startswith(f"{path}/") for name in tracked):
                missing.append(f"{page.name} -> {target}")
    assert missing == []


def test_the_readme_layout_table_matches_the_tree():
    readme = (PROJECT / "README.md").read_text()
    table = readme.split("## Layout", 1)[1].split("\n## ", 1)[0]
    paths = re.findall(r"^\| `([^`]+)`", table, re.M)
    assert paths, "the README has a layout table"
    missing = [path for path in paths if not list(PROJECT.glob(path.rstrip("/")))]
    assert missing == []
    rooms = {path.name for path in PACKAGE.iterdir() if path.is_dir() and not path.name.startswith("__")}
    listed = {Path(path.rstrip("/")).name for path in paths}
    assert rooms - listed == set(), "every folder of scheduler/ is in the layout table"


def test_every_setting_is_documented_in_the_readme():
    from scheduler.conf import SchedulerSettings

    readme = (PROJECT / "README.md").read_text()
    missing = [setting.key for setting in SchedulerSettings.declared().values()
               if setting.parse is not None and setting.key not in readme]
    assert missing == []


def test_the_statement_catalogue_lists_every_statement():
    from scheduler import sql

    catalogue = (PROJECT / "docs" / "architecture.md").read_text()
    missing = [name for name in sql.raw_blocks() if f"`{name}`" not in catalogue]
    assert missing == [], "run .venv/bin/python docs/make_catalogue.py"


def test_the_provider_recipes_in_the_docs_are_the_tested_files():
    """docs/providers.md shows each recipe exactly as the file the tests build (tests/providers/test_modal.py,
    tests/contract/test_daytona_contract.py)."""
    guide = (PROJECT / "docs" / "providers.md").read_text()
    for recipe in sorted((PROJECT / "docs" / "recipes").iterdir()):
        assert f"`docs/recipes/{recipe.name}`" in guide and recipe.read_text() in guide, recipe.name
