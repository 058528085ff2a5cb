"""Stand-in for the pip bootstrap script ansible-test downloads (get-pip.py).

ansible-test bootstraps pip into each empty virtual environment it makes by
running a get-pip.py that it fetches from ci-files.testing.ansible.com, a site
CI machines may not reach. This script does the same from what every Python
venv can already use: it runs the pip wheel bundled with ensurepip and lets it
install the pip version ansible-test asks for from the package index.
tools/test puts it where ansible-test looks for its cached copy.
"""

from __future__ import annotations

import glob
import os
import sys

import ensurepip

# get-pip.py's own options; pip itself does not know them.
GET_PIP_ONLY_OPTIONS = ("--no-setuptools", "--no-wheel")


def bundled_pip_wheel() -> str:
    """The pip wheel that ships with this Python's ensurepip."""
    bundled = os.path.join(os.path.dirname(ensurepip.__file__), "_bundled")
    wheels = sorted(glob.glob(os.path.join(bundled, "pip-*.whl")))
    if not wheels:
        sys.exit("get-pip: this Python's ensurepip has no bundled pip wheel (install python3-venv)")
    return wheels[-1]


def main() -> int:
    """Install what the arguments name with the bundled pip."""
    sys.path.insert(0, bundled_pip_wheel())
    from pip._internal.cli.main import main as pip_main  # pylint: disable=import-outside-toplevel

    arguments = [argument for argument in sys.argv[1:] if argument not in GET_PIP_ONLY_OPTIONS]
    return pip_main(["install", *arguments])


if __name__ == "__main__":
    sys.exit(main())
