"""A tiler study in optuna-dashboard and a `tiler report` page, opened in a real headless Chromium.

1. A small TPE study is run with the CLI (`tiler search --strategy tpe --storage sqlite:///...`), optuna-dashboard
   is started on that storage on localhost, and the study is opened: its History chart must name the objective
   (`predicted_us`), the best trial's page must list each sampled knob as a parameter (`base_m 48`, ...) and the
   user attributes `predicted_us`, `bound`, `tiling`, `tiling_label` (with the trial's label).
2. `tiler report` draws the README's sweep (Llama-3-8B's GEMMs at M = 1, 128, 4096 on the 910B3 and the H200)
   and the page is opened from a file:// URL: plotly must draw its three charts (an SVG each, with its title, the
   roofline's points, a bar per row, the pipes) with no JavaScript error and no request leaving the file
   (plotly.js is inline).

Both pages are checked for the same things: no page error, no console error, no request to anything but the
dashboard on localhost (or the file itself). The screenshots are written to docs/images/ (`--check`: nothing is
written). tests/test_dashboard_browser.py and tests/test_report.py run the same checks and skip where
Chromium, playwright or optuna-dashboard is missing.

Needs Chromium (Debian: `apt-get install chromium`; another binary via TILER_CHROMIUM=/path), and
`pip install 'tiler[viz]'` (optuna-dashboard, playwright). playwright drives the installed Chromium
(executable_path): `playwright install` (a browser download) is neither needed nor used. Chromium runs headless,
sandbox and GPU off, with networking extras off and a fresh profile (--user-data-dir) every time.

    python tests/browser_checks.py            # checks, then writes docs/images/*.png (~25 s)
    python tests/browser_checks.py --check    # checks only
"""

from __future__ import annotations

import argparse
import contextlib
import os
import shutil
import socket
import subprocess
import sys
import tempfile
import time
import urllib.request
from dataclasses import dataclass, field
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
IMAGES = ROOT / "docs" / "images"

# the flags every Chromium here starts with (the network is closed: nothing in the background may try to reach out);
# the fresh --user-data-dir is the persistent context's folder (see browser())
CHROMIUM_FLAGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
]
CHROMIUM_NAMES = ("chromium", "chromium-browser", "google-chrome", "google-chrome-stable")
TIMEOUT_MS = 60_000  # per wait in the browser: only there so a broken page fails instead of hanging

# the study: the README's TPE search, small
STUDY_ARGS = [
    "--op",
    "matmul",
    "--chip",
    "ascend910b3",
    "--shape",
    "M=1024,N=2048,K=4096",
    "--strategy",
    "tpe",
]
USER_ATTRS = ("predicted_us", "bound", "tiling", "tiling_label")
REPORT_SHAPES = ROOT / "examples" / "shapes" / "llama3_8b.csv"
REPORT_M = ("1", "128", "4096")  # three of its eight batch sizes: 30 rows, a picture of readable size
REPORT_CHIPS = "ascend910b3,h200"
REPORT_DIVS = ("tiler-roofline", "tiler-times", "tiler-pipes")


def chromium_path() -> str | None:
    """The Chromium binary: $TILER_CHROMIUM if set (None if it is not a file), else the first on PATH."""
    env = os.environ.get("TILER_CHROMIUM")
    if env is not None:
        return env if Path(env).is_file() else None
    return next((p for p in map(shutil.which, CHROMIUM_NAMES) if p), None)


def dashboard_command() -> list[str] | None:
    """The optuna-dashboard CLI: next to this Python first (a venv's bin/), else on PATH."""
    local = Path(sys.executable).parent / "optuna-dashboard"
    found = str(local) if local.is_file() else shutil.which("optuna-dashboard")
    return [found] if found else None


def missing(dashboard: bool = True) -> str | None:
    """Why the browser checks cannot run here (for pytest.skip), or None."""
    if chromium_path() is None:
        env = os.environ.get("TILER_CHROMIUM")
        where = (
            f"TILER_CHROMIUM={env} is not a file"
            if env is not None
            else "none of " + ", ".join(CHROMIUM_NAMES)
        )
        return f"no Chromium ({where}): apt-get install chromium"
    try:
        import playwright.sync_api  # noqa: F401
    except ImportError:
        return "playwright is not installed: pip install 'tiler[viz]'"
    if dashboard:
        try:
            import optuna_dashboard  # noqa: F401
        except ImportError:
            return "optuna-dashboard is not installed: pip install 'tiler[viz]'"
        if dashboard_command() is None:
            return "the optuna-dashboard command is not on PATH"
    return None


@contextlib.contextmanager
def browser(width: int = 1280, height: int = 900):
    """A playwright context on the installed Chromium, headless, with a fresh profile folder."""
    from playwright.sync_api import sync_playwright

    exe = chromium_path()
    if exe is None:
        raise RuntimeError(missing(dashboard=False))
    with tempfile.TemporaryDirectory(prefix="tiler-chromium-") as profile, sync_playwright() as p:
        ctx = p.chromium.launch_persistent_context(
            profile,
            executable_path=exe,
            headless=True,
            args=CHROMIUM_FLAGS,
            viewport={"width": width, "height": height},
            timeout=TIMEOUT_MS,
        )
        ctx.set_default_timeout(TIMEOUT_MS)
        try:
            yield ctx
        finally:
            ctx.close()


@dataclass
class Watch:
    """What a page did besides drawing: JavaScript errors, console errors and requests to other places."""

    allowed: tuple[str, ...]  # URL prefixes a request may go to
    page_errors: list[str] = field(default_factory=list)
    console_errors: list[str] = field(default_factory=list)
    foreign: list[str] = field(default_factory=list)

    def attach(self, page) -> None:
        page.on("pageerror", lambda e: self.page_errors.append(str(e)))
        page.on("console", lambda m: self.console_errors.append(m.text) if m.type == "error" else None)
        page.on("request", lambda r: None if r.url.startswith(self.allowed) else self.foreign.append(r.url))

    def check(self, what: str) -> None:
        assert not self.page_errors, f"{what}: JavaScript errors: {self.page_errors[:3]}"
        assert not self.console_errors, f"{what}: console errors: {self.console_errors[:3]}"
        assert not self.foreign, f"{what}: requests off the page's origin: {self.foreign[:3]}"


# ------------------------------------------------------------------ the study in optuna-dashboard


@dataclass
class Study:
    url: str  # storage URL
    name: str
    study_id: int  # the storage's id, which the dashboard's URLs use
    metric: str
    best_number: int
    best_params: dict
    best_attrs: dict


def run_study(db: Path, trials: int = 30, seed: int = 0, name: str = "tiler-dashboard") -> Study:
    """A TPE study into SQLite `db` through the CLI (a fresh process, as a user runs it), read back with optuna."""
    import optuna

    url = f"sqlite:///{db}"
    cmd = [sys.executable, "-m", "tiler", "search", *STUDY_ARGS, "--trials", str(trials), "--seed", str(seed)]
    proc = subprocess.run(
        [*cmd, "--storage", url, "--study-name", name], capture_output=True, text=True, timeout=600, cwd=ROOT
    )
    assert proc.returncode == 0, proc.stderr[-2000:]
    study = optuna.load_study(study_name=name, storage=url)
    best = study.best_trial
    return Study(
        url=url,
        name=name,
        study_id=study._study_id,
        metric=study.metric_names[0],
        best_number=best.number,
        best_params=dict(best.params),
        best_attrs=dict(best.user_attrs),
    )


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@contextlib.contextmanager
def dashboard(storage_url: str, wait_s: float = 60):
    """optuna-dashboard on 127.0.0.1 (a free port) on `storage_url`: yields its base URL, stops it on exit."""
    port = free_port()
    base = f"http://127.0.0.1:{port}"
    with tempfile.TemporaryFile("w+") as log:
        proc = subprocess.Popen(
            [*dashboard_command(), "--host", "127.0.0.1", "--port", str(port), "--quiet", storage_url],
            stdout=log,
            stderr=subprocess.STDOUT,
        )
        try:
            deadline = time.monotonic() + wait_s
            while True:
                if proc.poll() is not None:
                    log.seek(0)
                    raise RuntimeError(f"optuna-dashboard exited ({proc.returncode}): {log.read()[-2000:]}")
                try:
                    with urllib.request.urlopen(f"{base}/api/studies", timeout=5) as r:
                        if r.status == 200:
                            break
                except OSError:
                    pass
                if time.monotonic() > deadline:
                    raise RuntimeError(f"optuna-dashboard did not answer on {base} within {wait_s:.0f} s")
                time.sleep(0.2)
            yield base
        finally:
            proc.terminate()
            try:
                proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()


def check_dashboard(ctx, base: str, study: Study, shots: Path | None = None) -> dict[str, str]:
    """Open the study's page and its best trial's page; assert the names are in the rendered DOM.
    Returns the text of both pages; with `shots`, saves optuna_dashboard_history.png (the study: the objective
    named on the History chart) and optuna_dashboard.png (the best trial: knob parameters, user attributes)."""
    watch = Watch(allowed=(base + "/", "data:", "blob:", "about:"))
    page = ctx.new_page()
    watch.attach(page)
    sid = study.study_id
    # the study: History names the objective (the y-axis select and the chart's axis title)
    page.goto(f"{base}/dashboard/studies/{sid}")
    page.locator("svg text", has_text=study.metric).first.wait_for()
    # and the knobs (the sampled ones) by name in the Hyperparameter Importance chart
    for k in study.best_params:
        page.locator("svg text", has_text=k).first.wait_for()
    page.wait_for_load_state("networkidle")
    history = page.inner_text("body")
    assert study.name in history and f"{study.metric}" in history
    if shots:
        page.screenshot(path=shots / "optuna_dashboard_history.png")
    # the best trial: its parameters and user attributes, by name (wider: more of the one-line tiling label)
    page.set_viewport_size({"width": 1600, "height": 800})
    page.goto(f"{base}/dashboard/studies/{sid}/trials?numbers={study.best_number}")
    page.get_by_text("User Attributes").first.wait_for()
    page.get_by_text(f"Trial {study.best_number} (trial_id=").first.wait_for()
    page.get_by_text("tiling_label").first.wait_for()
    page.wait_for_load_state("networkidle")
    trial = page.inner_text("body")
    detail = trial.split(f"Trial {study.best_number} (trial_id=", 1)[1]
    for k, v in study.best_params.items():
        assert f"{k} {v}" in detail, f"parameter {k}={v} not shown"
    shown = detail.split("User Attributes", 1)[1]
    for k in USER_ATTRS:
        assert k in study.best_attrs, f"the study's best trial has no user attribute {k!r}"
        assert k in shown, f"user attribute {k!r} not shown"
    assert f"tiling_label {study.best_attrs['tiling_label']}" in shown
    assert f"bound {study.best_attrs['bound']}" in shown
    if shots:
        page.screenshot(path=shots / "optuna_dashboard.png")
    page.close()
    watch.check("optuna-dashboard")
    return {"history": history, "trial": trial}


# ------------------------------------------------------------------ the tiler report page


def write_sweep_report(folder: Path) -> Path:
    """The README's example, smaller: sweep Llama-3-8B's GEMMs at M in REPORT_M on the 910B3 and the H200, then
    `tiler report` it."""
    shapes, csv, page = folder / "llama3_8b.csv", folder / "llama.csv", folder / "llama.html"
    lines = REPORT_SHAPES.read_text().splitlines()
    shapes.write_text("\n".join([lines[0], *(r for r in lines[1:] if r.split(",")[1] in REPORT_M)]) + "\n")
    for args in (
        ["sweep", str(shapes), "--op", "matmul", "--chip", REPORT_CHIPS, "--out", str(csv)],
        ["report", str(csv), "--out", str(page)],
    ):
        proc = subprocess.run(
            [sys.executable, "-m", "tiler", *args], capture_output=True, text=True, timeout=600, cwd=ROOT
        )
        assert proc.returncode == 0, proc.stderr[-2000:]
    return page


def check_report(ctx, html: Path, shot: Path | None = None, width: int = 1200) -> dict:
    """Open the page from its file:// URL; assert plotly drew the three charts, offline, without errors.
    Returns per chart: its title, and how many points and bars it drew."""
    url = html.resolve().as_uri()
    watch = Watch(allowed=(url, "data:", "blob:", "about:"))
    page = ctx.new_page()
    page.set_viewport_size({"width": width, "height": 900})
    watch.attach(page)
    page.goto(url)
    page.wait_for_function(
        "ids => ids.every(id => { const d = document.getElementById(id);"
        " return d && d._fullLayout && d.querySelector('svg.main-svg'); })",
        arg=list(REPORT_DIVS),
    )
    page.wait_for_load_state("networkidle")
    drawn = page.evaluate(
        """ids => Object.fromEntries(ids.map(id => {
            const d = document.getElementById(id);
            const title = d.querySelector('.gtitle');
            return [id, {
                title: title ? title.textContent : '',
                points: d.querySelectorAll('.scatterlayer .trace .points path.point').length,
                lines: d.querySelectorAll('.scatterlayer .trace path.js-line').length,
                bars: d.querySelectorAll('.barlayer .trace .points .point').length,
                traces: d.data.length,
            }];
        }))""",
        list(REPORT_DIVS),
    )
    roof, times, pipes = (drawn[d] for d in REPORT_DIVS)
    assert roof["title"].startswith("Roofline"), roof
    assert roof["points"] > 0 and roof["lines"] > 0, roof
    assert times["title"].startswith("Predicted time per row"), times
    assert times["bars"] > 0, times
    assert pipes["title"].startswith("Per-pipe breakdown of"), pipes
    assert pipes["bars"] > 0, pipes
    if shot:
        page.screenshot(path=shot, full_page=True)
    page.close()
    watch.check("tiler report")
    return drawn


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--check", action="store_true", help="check only, write no screenshot")
    ap.add_argument("--out", type=Path, default=IMAGES, help="folder for the screenshots (docs/images)")
    ap.add_argument("--trials", type=int, default=30)
    args = ap.parse_args(argv)
    why = missing()
    if why:
        print(f"error: {why}", file=sys.stderr)
        return 2
    shots = None if args.check else args.out
    if shots:
        shots.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(prefix="tiler-dashboard-") as tmp:
        tmp = Path(tmp)
        t0 = time.perf_counter()
        study = run_study(tmp / "studies.db", trials=args.trials)
        page = write_sweep_report(tmp)
        with dashboard(study.url) as base, browser(1280, 900) as ctx:
            check_dashboard(ctx, base, study, shots)
            print(
                f"optuna-dashboard: study {study.name!r} shows {study.metric}, knobs "
                f"{', '.join(study.best_params)} and user attributes {', '.join(USER_ATTRS)}"
            )
            drawn = check_report(ctx, page, shots / "report.png" if shots else None)
            print("tiler report: " + "; ".join(f"{k}: {v}" for k, v in drawn.items()))
        print(f"checked in {time.perf_counter() - t0:.1f} s")
    if shots:
        for name in ("optuna_dashboard.png", "optuna_dashboard_history.png", "report.png"):
            print(f"wrote {shots / name} ({(shots / name).stat().st_size / 1024:.0f} KiB)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
