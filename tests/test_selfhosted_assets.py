"""The build renders the maths with the vendored KaTeX when it is there, and falls back to MathJax's CDN, saying so."""

import json
import logging
from pathlib import Path
from types import SimpleNamespace

import pytest
from sphinx.errors import ConfigError

import selfhosted_assets as ext
from sphinxcontrib import katex

ROOT = Path(__file__).resolve().parents[1]

def config():
    return SimpleNamespace(mathjax_path="https://cdn/mathjax.js", html_math_renderer=None)


def app(srcdir):
    """A stand-in Sphinx app: its srcdir, and the extensions the code under test set up."""
    extensions = []
    return SimpleNamespace(srcdir=str(srcdir), extensions=extensions, setup_extension=extensions.append)


def vendored(srcdir: Path):
    static = srcdir / "book" / "_static"
    files = {"katex_css": "vendor/katex/katex.min.css"}
    for rel in files.values():
        (static / rel).parent.mkdir(parents=True, exist_ok=True)
        (static / rel).write_text("// stand-in")
    (static / "vendor" / "manifest.json").write_text(json.dumps({**files, "versions": {"katex": katex.katex_version}}))


def test_vendored_katex_renders_the_maths_at_build_time(tmp_path):
    vendored(tmp_path)
    cfg, a = config(), app(tmp_path)
    ext.choose_assets(a, cfg)
    # KaTeX turns each formula into HTML while the book builds; the pages load its stylesheet from the book
    assert a.extensions == ["sphinxcontrib.katex"]
    assert (cfg.html_math_renderer, cfg.katex_prerender, cfg.katex_css_path) == ("katex", True, "vendor/katex/katex.min.css")


def test_prerendering_needs_node(tmp_path, monkeypatch):
    vendored(tmp_path)
    monkeypatch.setattr(ext.shutil, "which", lambda name: None)
    with pytest.raises(ConfigError, match="`node` is not on PATH"):
        ext.choose_assets(app(tmp_path), config())


def test_the_stylesheet_matches_the_katex_that_renders(tmp_path):
    vendored(tmp_path)
    manifest = tmp_path / "book" / "_static" / "vendor" / "manifest.json"
    manifest.write_text(json.dumps({**json.loads(manifest.read_text()), "versions": {"katex": "0.0.1"}}))
    with pytest.raises(ConfigError, match=f"pin katex {katex.katex_version}"):
        ext.choose_assets(app(tmp_path), config())


def test_without_node_the_build_falls_back_to_the_cdns_and_says_so(tmp_path, monkeypatch, caplog):
    monkeypatch.delenv("BOOK_REQUIRE_SELFHOSTED", raising=False)
    cfg = config()
    a = app(tmp_path)
    with caplog.at_level(logging.INFO):
        ext.choose_assets(a, cfg)
    # the maths is left to Sphinx's default renderer, MathJax from its CDN
    assert (a.extensions, cfg.html_math_renderer, cfg.mathjax_path) == ([], None, "https://cdn/mathjax.js")
    assert "third-party CDN" in caplog.text


def test_the_deploy_build_refuses_to_fall_back(tmp_path, monkeypatch):
    monkeypatch.setenv("BOOK_REQUIRE_SELFHOSTED", "1")
    with pytest.raises(ConfigError, match="manifest.json is missing"):
        ext.choose_assets(app(tmp_path), config())


def test_a_manifest_naming_missing_files_is_refused(tmp_path):
    vendored(tmp_path)
    (tmp_path / "book" / "_static" / "vendor" / "katex" / "katex.min.css").unlink()
    with pytest.raises(ConfigError, match="missing"):
        ext.choose_assets(app(tmp_path), config())
