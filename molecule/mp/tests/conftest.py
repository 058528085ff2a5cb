"""The mp scenario's tests: the hooks and fixture every scenario shares
(molecule/shared/helpers/scenario_plugin.py), its modules run in the order order.txt lists."""
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "shared" / "helpers"))
from scenario_plugin import *  # noqa: E402,F403 (pytest finds the shared hooks here)  # pylint: disable=wildcard-import,unused-wildcard-import
