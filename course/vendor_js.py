"""Self-host the book's maths styles: copy KaTeX's stylesheet and fonts from node_modules into book/_static/vendor/.

    python -m course vendor            # `npm ci` when needed (and npm exists), then copy
    python -m course vendor --clean    # remove book/_static/vendor/ (the book then uses the CDNs)

Versions come from the committed package-lock.json; the copies are never committed. book/_ext/selfhosted_assets.py
reads the manifest written here; without it (no Node) the book leaves the maths to MathJax from a CDN, and says so.
"""

from __future__ import annotations

import json
import shutil
import subprocess

from course.layout import NODE_MODULES, ROOT, VENDOR
MANIFEST = VENDOR / "manifest.json"

# what the built book loads, relative to book/_static/; the extension reads this key from the manifest
KATEX_CSS = "vendor/katex/katex.min.css"

# (package, source relative to the package, destination relative to VENDOR); a directory is copied whole
COPIES = [
    # KaTeX's stylesheet and fonts for the maths sphinxcontrib-katex renders to HTML at build time (its
    # katex_prerender, with the katex.min.js of the same version that the Python package ships)
    ("katex", "dist/katex.min.css", "katex/katex.min.css"),
    ("katex", "dist/fonts", "katex/fonts"),
]


def notice(msg: str) -> None:
    print(f"vendor_js: {msg}", flush=True)


def npm_ci_if_needed() -> bool:
    """Install node_modules from the lockfile when missing or stale; False when npm is not available."""
    lock = ROOT / "package-lock.json"
    installed = NODE_MODULES / ".package-lock.json"  # npm writes this on every install
    if installed.exists() and installed.stat().st_mtime >= lock.stat().st_mtime:
        return True
    npm = shutil.which("npm")
    if npm is None:
        return installed.exists()
    notice("npm ci (from package-lock.json)")
    subprocess.run([npm, "ci", "--no-audit", "--no-fund", "--loglevel=error"], cwd=ROOT, check=True)
    return True


def copy_all() -> dict:
    if VENDOR.exists():
        shutil.rmtree(VENDOR)
    VENDOR.mkdir(parents=True)
    for package, src, dest in COPIES:
        source, target = NODE_MODULES / package / src, VENDOR / dest
        if not source.exists():
            raise SystemExit(f"vendor_js: expected {package}/{src} in node_modules; got nothing. Run `npm ci`.")
        target.parent.mkdir(parents=True, exist_ok=True)
        if source.is_dir():
            shutil.copytree(source, target)
        else:
            shutil.copy2(source, target)
    manifest = {
        "katex_css": KATEX_CSS,
        "versions": {p: json.loads((NODE_MODULES / p / "package.json").read_text())["version"]
                     for p in sorted({c[0] for c in COPIES})},
    }
    MANIFEST.write_text(json.dumps(manifest, indent=2) + "\n")
    return manifest


def add_arguments(parser) -> None:
    parser.add_argument("--clean", action="store_true", help="remove book/_static/vendor/")


def run(args) -> int:
    if args.clean:
        shutil.rmtree(VENDOR, ignore_errors=True)
        notice(f"removed {VENDOR.relative_to(ROOT)}")
        return 0
    if not npm_ci_if_needed():
        shutil.rmtree(VENDOR, ignore_errors=True)
        notice(
            "NOTICE: npm is not installed and node_modules/ is missing, so nothing is self-hosted: the book "
            "will load MathJax from a third-party CDN when read. "
            "Install Node.js (npm) and rerun `make book` for a self-contained book."
        )
        return 0
    manifest = copy_all()
    size = sum(p.stat().st_size for p in VENDOR.rglob("*") if p.is_file())
    notice(f"copied {manifest['versions']} into {VENDOR.relative_to(ROOT)}/ ({size / 1e6:.1f} MB)")
    return 0
