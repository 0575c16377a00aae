"""Which extra brings which optional library: bot/adapters/extras.py against pyproject.toml,
and the one line a missing library becomes."""

from __future__ import annotations

import re
from importlib.metadata import PackageNotFoundError, packages_distributions
from importlib.metadata import requires as requires_of

import pytest

from bot.adapters.extras import EXTRA_OF_MODULE, install_hint, require
from tests.clean_install import requirements


def _name(requirement: str) -> str:
    found = re.match(r"[\w.-]+", requirement)
    assert found is not None, requirement
    return re.sub(r"[-_.]+", "-", found[0]).lower()


def _names(found: list[str]) -> set[str]:
    return {_name(r) for r in found}


def _closure(names: set[str]) -> set[str]:
    """``names`` and what they need in turn (the installed metadata; no optional extras)."""
    pending, seen = list(names), set(names)
    while pending:
        try:
            needed = requires_of(pending.pop()) or []
        except PackageNotFoundError:
            continue
        for requirement in needed:
            name = _name(requirement)
            if "extra ==" not in requirement and name not in seen:
                seen.add(name)
                pending.append(name)
    return seen


def test_each_optional_module_is_brought_by_its_extra_and_not_by_a_plain_install() -> None:
    providers = packages_distributions()  # the dev environment has every extra
    plain = _names(requirements())
    for module, (extra, _) in EXTRA_OF_MODULE.items():
        distributions = _names(providers[module])
        assert distributions & _closure(_names(requirements(extra))), (module, extra)
        assert not distributions & plain, module


def test_a_missing_optional_library_names_its_extra() -> None:
    missing = ModuleNotFoundError("No module named 'wandb.apis'", name="wandb.apis")
    assert install_hint(missing) == (
        "needs the W&B client (wandb.apis), which is not installed: "
        'pip install "threshold-bot[wandb]"'
    )
    psycopg = ModuleNotFoundError("No module named 'psycopg'", name="psycopg")
    assert install_hint(psycopg) is not None and '"threshold-bot[postgres]"' in install_hint(
        psycopg
    )


def test_any_other_import_error_is_not_a_missing_extra() -> None:
    assert install_hint(ModuleNotFoundError("No module named 'bot.nope'", name="bot.nope")) is None
    assert install_hint(ImportError("cannot import name 'x' from 'wandb'", name="wandb")) is None


def test_require_raises_for_what_is_not_installed_only() -> None:
    require("yaml")
    with pytest.raises(ModuleNotFoundError) as raised:
        require("threshold_bot_no_such_module")
    assert raised.value.name == "threshold_bot_no_such_module"
