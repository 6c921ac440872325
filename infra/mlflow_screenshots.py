"""Screenshots of the MLflow UI comparing runs, in headless Chromium: docs/img/mlflow-*.png.

What it shows is what `mage ui` serves after real stages: a scratch project (a temporary
folder) gets this project's params.yaml with the smoke profile applied and ``reproduce.runs``
replaced by Kuhn Poker runs of MAGE, GiGPO and ReAct, two seeds each; every run is trained
and evaluated by the real commands (``mage train --run R``, ``mage evaluate --run R``) into
the scratch project's ``mlflow.db``; then ``mage ui`` serves it and Chromium opens the saved
view "Table 1: Kuhn Poker by method" (``mage_core.tracking.views``) as the runs table and
as the charts, and the registered model ``mage-kuhn_poker-mage``:

- ``mlflow-grouped-by-method.png``: the runs table, grouped by method;
- ``mlflow-charts.png``: the chart view (Table 1's bars by method, parallel coordinates,
  the adaptation curves);
- ``mlflow-model-version.png``: the registered model's versions, one per trained seed.

Needs Debian's Chromium (``apt-get install -y chromium``) and the ``playwright`` package in
any Python 3 (no browser download: it drives ``/usr/bin/chromium``); the stages run with this
project's virtualenv::

    python3 -m venv /tmp/pw && /tmp/pw/bin/pip install playwright
    /tmp/pw/bin/python infra/mlflow_screenshots.py            # ~3 min on 2 cores

It writes nothing in the project but the PNGs (``--out``, default docs/img).
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import socket
import subprocess
import sys
import tempfile
import time
import urllib.request
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
METHODS = ("mage", "gigpo", "react")
SEEDS = (0, 1)
CHROMIUM = "/usr/bin/chromium"

#: Run in the project's Python: the smoke profile applied, the runs replaced.
PARAMS_SCRIPT = """
import sys, yaml
from pathlib import Path
from mage_core.stages.reproduce import profile_params
data = profile_params(Path(sys.argv[1]), "smoke")
runs = {}
for method in sys.argv[3].split(","):
    for seed in map(int, sys.argv[4].split(",")):
        name = f"kuhn_poker-{method}" + (f"-seed{seed}" if seed else "")
        runs[name] = {"env": "kuhn_poker", "method": method, "set": {"seed": seed}}
data["reproduce"]["runs"] = runs
Path(sys.argv[2]).write_text(yaml.safe_dump(data, sort_keys=False))
print(" ".join(runs))
"""


def _run(cmd: list[str], cwd: Path, env: dict[str, str]) -> str:
    done = subprocess.run(cmd, cwd=cwd, env=env, capture_output=True, text=True, check=False)
    if done.returncode != 0:
        raise SystemExit(f"`{' '.join(cmd)}` failed:\n{done.stdout[-3000:]}\n{done.stderr[-3000:]}")
    return done.stdout


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def _wait_for(url: str, ui: subprocess.Popen, seconds: float = 120) -> None:
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if ui.poll() is not None:
            raise SystemExit("mage ui exited")
        try:
            with urllib.request.urlopen(url, timeout=2):
                return
        except OSError:
            time.sleep(0.5)
    raise SystemExit(f"{url} never answered")


def fill_store(project: Path, venv: Path) -> None:
    """The scratch project: params, a git commit (lineage tags), the runs trained and evaluated."""
    env = {**os.environ, "MLFLOW_DISABLE_TELEMETRY": "true", "DVC_NO_ANALYTICS": "1"}
    env.pop("MLFLOW_TRACKING_URI", None)
    python, mage = str(venv / "bin" / "python"), str(venv / "bin" / "mage")
    names = _run([python, "-c", PARAMS_SCRIPT, str(ROOT / "params.yaml"), str(project / "params.yaml"),
                  ",".join(METHODS), ",".join(map(str, SEEDS))], ROOT, env).split()
    for cmd in (["git", "init", "-q"], ["git", "add", "params.yaml"],
                ["git", "-c", "user.name=mage", "-c", "user.email=mage@localhost", "commit", "-q", "-m", "params"]):
        _run(cmd, project, env)
    for name in names:
        started = time.monotonic()
        _run([mage, "train", "--run", name, "--out", f"artifacts/train/{name}"], project, env)
        _run([mage, "evaluate", "--run", name, "--policy", f"artifacts/train/{name}/best",
              "--out", f"artifacts/eval/{name}", "--suites", "in_domain"], project, env)
        print(f"{name}: trained and evaluated in {time.monotonic() - started:.0f} s", flush=True)


def screenshots(base: str, experiment_id: str, out: Path) -> list[Path]:
    from playwright.sync_api import sync_playwright

    view = f"{base}/#/experiments/{experiment_id}/runs?viewStateShareKey=mage-table1-kuhn_poker" \
           "&workflowType=machine_learning"
    # (address, file, window height, text that shows once the page has its data)
    shots = [(f"{view}", out / "mlflow-grouped-by-method.png", 690, "Group: mage"),
             (f"{view}&compareRunsMode=CHART", out / "mlflow-charts.png", 1500, "Group: mage"),
             (f"{base}/#/models/mage-kuhn_poker-mage", out / "mlflow-model-version.png", 900, "Version 2")]
    written = []
    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=CHROMIUM, args=["--no-sandbox"])
        for url, path, height, ready in shots:
            page = browser.new_page(viewport={"width": 1800, "height": height})
            page.goto(url)
            page.get_by_text(ready).first.wait_for(timeout=60_000)  # the UI polls: no "network idle"
            time.sleep(4)  # charts draw after the data arrives
            close = page.locator('[aria-label="Close"]')  # the assistant side panel, open by default
            if close.count():
                close.first.click()
                time.sleep(1.5)
            page.screenshot(path=str(path))
            written.append(path)
            page.close()
        browser.close()
    return written


#: Run in the project's Python (Pillow comes with matplotlib): 128 colours, a third of the bytes.
SHRINK_SCRIPT = """
import sys
from PIL import Image
for path in sys.argv[1:]:
    image = Image.open(path).convert("RGB")
    image.quantize(colors=128, method=Image.Quantize.MEDIANCUT, dither=Image.Dither.NONE).save(path, optimize=True)
"""


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", type=Path, default=ROOT / "docs" / "img")
    parser.add_argument("--venv", type=Path, default=ROOT / ".venv", help="the project's virtualenv")
    parser.add_argument("--keep", type=Path, default=None, help="fill this folder instead of a temporary one")
    args = parser.parse_args(argv)
    if not Path(CHROMIUM).exists():
        raise SystemExit(f"{CHROMIUM} missing: apt-get install -y chromium")
    args.out.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory() as tmp:
        project = args.keep or Path(tmp) / "project"
        project.mkdir(parents=True, exist_ok=True)
        if not (project / "mlflow.db").exists():
            fill_store(project, args.venv)
        port = _free_port()
        env = {k: v for k, v in os.environ.items() if k != "MLFLOW_TRACKING_URI"}
        ui = subprocess.Popen([str(args.venv / "bin" / "mage"), "ui", "--port", str(port)], cwd=project, env=env,
                              stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, start_new_session=True)
        try:
            base = f"http://127.0.0.1:{port}"
            _wait_for(f"{base}/health", ui)
            url = f"{base}/api/2.0/mlflow/experiments/get-by-name?experiment_name=mage"
            with urllib.request.urlopen(url, timeout=10) as response:
                experiment_id = json.loads(response.read())["experiment"]["experiment_id"]
            paths = screenshots(base, experiment_id, args.out)
            _run([str(args.venv / "bin" / "python"), "-c", SHRINK_SCRIPT, *map(str, paths)], ROOT, dict(os.environ))
            for path in paths:
                print(f"wrote {path} ({path.stat().st_size // 1024} KiB)")
        finally:
            os.killpg(ui.pid, signal.SIGTERM)
            ui.wait(timeout=30)
    return 0


if __name__ == "__main__":
    sys.exit(main())
