"""What may be reused, under which licence: the texts in the repository, the README, the package metadata.

The footer of every built page is checked in tests/browser/test_built_pages.py.
"""

import hashlib
import re
import tomllib
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
# the legal code as published in npm's spdx-license-list 6.12.0 (licenses/CC-BY-4.0.json), not retyped
CC_BY_SHA256 = "d557539df68e771cc1eedcc91d13f70fca930e508d11eedcafa4b15db49e3744"


def test_the_licence_texts_are_in_the_repository():
    cc = (ROOT / "LICENSES" / "CC-BY-4.0.txt").read_bytes()
    assert hashlib.sha256(cc).hexdigest() == CC_BY_SHA256, "LICENSES/CC-BY-4.0.txt is not the CC BY 4.0 legal code"
    assert cc.startswith(b"Creative Commons Attribution 4.0 International")
    # GitHub detects the repository's licence from LICENSE at the top level: it stays the MIT text
    mit = (ROOT / "LICENSE").read_text()
    assert mit.startswith("MIT License") and "Permission is hereby granted, free of charge" in mit


def test_the_package_declares_mit_and_ships_its_text():
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    assert project["license"] == "MIT"
    assert project["license-files"] == ["LICENSE"]


def test_the_readme_says_what_is_under_which_licence_and_how_to_credit():
    readme = (ROOT / "README.md").read_text()
    section = re.search(r"^## Licence\n(.*?)(?=^## |\Z)", readme, re.M | re.S)
    assert section, "README.md has no '## Licence' section"
    text = section.group(1)
    for needle in ("CC BY 4.0", "LICENSES/CC-BY-4.0.txt", "https://creativecommons.org/licenses/by/4.0/",
                   "MIT", "(LICENSE)", "credit"):
        assert needle in text, f"README's Licence section does not mention {needle!r}"
