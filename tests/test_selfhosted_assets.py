"""The build picks self-hosted JavaScript when it was vendored, and falls back to the CDNs, saying so."""

import json
import logging
from pathlib import Path
from types import SimpleNamespace

import pytest
from sphinx.errors import ConfigError

import selfhosted_assets as ext

ROOT = Path(__file__).resolve().parents[1]

CDN = {"https://cdn.example/require.min.js": {"integrity": "x"},
       "https://cdn.example/html-manager@1/dist/embed-amd.js": {"data-jupyter-widgets-cdn": "y"}}


def config(js_files=()):
    return SimpleNamespace(html_js_files=list(js_files), nb_ipywidgets_js=dict(CDN), mathjax_path="https://cdn/mathjax.js")


def vendored(srcdir: Path):
    static = srcdir / "book" / "_static"
    files = {"html_manager_js": "vendor/html-manager/embed.js", "mathjax_js": "vendor/mathjax/tex-mml-chtml.js"}
    for rel in files.values():
        (static / rel).parent.mkdir(parents=True, exist_ok=True)
        (static / rel).write_text("// stand-in")
    (static / "vendor" / "manifest.json").write_text(json.dumps({**files, "versions": {"mathjax": "3"}}))


def test_vendored_files_are_served_from_the_book_in_load_order(tmp_path):
    vendored(tmp_path)
    cfg = config()
    ext.choose_assets(SimpleNamespace(srcdir=str(tmp_path)), cfg)
    assert list(cfg.nb_ipywidgets_js) == [ext.SETUP_JS, "vendor/html-manager/embed.js"]
    assert cfg.mathjax_path == "vendor/mathjax/tex-mml-chtml.js"
    assert not any(str(k).startswith("http") for k in cfg.nb_ipywidgets_js)


def test_without_node_the_build_falls_back_to_the_cdns_and_says_so(tmp_path, monkeypatch, caplog):
    monkeypatch.delenv("BOOK_REQUIRE_SELFHOSTED", raising=False)
    cfg = config()
    with caplog.at_level(logging.INFO):
        ext.choose_assets(SimpleNamespace(srcdir=str(tmp_path)), cfg)
    # the CDN's widget manager as its plain bundle, without require.js
    assert list(cfg.nb_ipywidgets_js) == [ext.SETUP_JS, "https://cdn.example/html-manager@1/dist/embed.js"]
    assert cfg.nb_ipywidgets_js["https://cdn.example/html-manager@1/dist/embed.js"] == CDN[list(CDN)[1]]
    assert cfg.mathjax_path == "https://cdn/mathjax.js"
    assert "third-party CDNs" in caplog.text


def test_the_deploy_build_refuses_to_fall_back(tmp_path, monkeypatch):
    monkeypatch.setenv("BOOK_REQUIRE_SELFHOSTED", "1")
    with pytest.raises(ConfigError, match="manifest.json is missing"):
        ext.choose_assets(SimpleNamespace(srcdir=str(tmp_path)), config())


def test_a_vendored_bundle_listed_for_every_page_is_refused(tmp_path):
    vendored(tmp_path)
    with pytest.raises(ConfigError, match="html_js_files"):
        ext.choose_assets(SimpleNamespace(srcdir=str(tmp_path)), config(["vendor/html-manager/embed.js"]))


def test_a_manifest_naming_missing_files_is_refused(tmp_path):
    vendored(tmp_path)
    (tmp_path / "book" / "_static" / "vendor" / "mathjax" / "tex-mml-chtml.js").unlink()
    with pytest.raises(ConfigError, match="missing"):
        ext.choose_assets(SimpleNamespace(srcdir=str(tmp_path)), config())


def test_a_manifest_from_before_the_plain_bundle_is_refused(tmp_path):
    vendored(tmp_path)
    manifest = tmp_path / "book" / "_static" / "vendor" / "manifest.json"
    manifest.write_text(json.dumps({**json.loads(manifest.read_text()), "html_manager_js": "vendor/html-manager/embed-amd.js"}))
    with pytest.raises(ConfigError, match="rerun"):
        ext.choose_assets(SimpleNamespace(srcdir=str(tmp_path)), config())
