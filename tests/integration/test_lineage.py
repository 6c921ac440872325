"""`mage lineage` on a real DVC project in a temporary git repository: it passes while
dvc.lock and the report describe the code and params, and names what went stale."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from mage_core.config import ConfigError
from mage_core.stages.lineage import report_claims
from mage_core.stages.report import lineage_line
from mage_core.tracking.lineage import git_state, lock_digest

pytestmark = pytest.mark.integration

DVC_YAML = """\
stages:
  make:
    cmd: python code/make.py
    deps:
      - code
    params:
      - a
    outs:
      - out
"""


def sh(repo: Path, *args: str) -> subprocess.CompletedProcess:
    env = {**os.environ, "DVC_NO_ANALYTICS": "1", "GIT_AUTHOR_NAME": "t", "GIT_AUTHOR_EMAIL": "t@t",
           "GIT_COMMITTER_NAME": "t", "GIT_COMMITTER_EMAIL": "t@t"}
    return subprocess.run(list(args), cwd=repo, env=env, capture_output=True, text=True, check=False)


def lineage(repo: Path) -> subprocess.CompletedProcess:
    return sh(repo, sys.executable, "-m", "mage_core", "lineage", "--project", str(repo))


@pytest.fixture
def repo(tmp_path: Path) -> Path:
    """A git repo with one DVC stage (code + params section ``a`` -> out/), reproduced, a
    report stating its lineage, all committed."""
    repo = tmp_path / "repo"
    (repo / "code").mkdir(parents=True)
    (repo / "code" / "make.py").write_text("import pathlib\npathlib.Path('out').mkdir(exist_ok=True)\n"
                                           "pathlib.Path('out/result.txt').write_text('1')\n")
    (repo / "params.yaml").write_text("a: 1\nb: 2\n")
    (repo / "dvc.yaml").write_text(DVC_YAML)
    for step in (("git", "init", "-q"), (sys.executable, "-m", "dvc", "init", "-q"),
                 (sys.executable, "-m", "dvc", "repro", "-q")):
        done = sh(repo, *step)
        assert done.returncode == 0, done.stderr
    assert sh(repo, "git", "add", "-A").returncode == 0
    assert sh(repo, "git", "commit", "-qm", "code and lineage").returncode == 0
    (repo / "reports").mkdir()  # as `mage report` writes it: from the committed code, then committed
    (repo / "reports" / "report.md").write_text("# report\n\n" + lineage_line(repo))
    assert sh(repo, "git", "add", "-A").returncode == 0
    assert sh(repo, "git", "commit", "-qm", "report").returncode == 0
    return repo


def test_lineage_holds_then_names_a_stale_code_or_params_dependency(repo: Path) -> None:
    done = lineage(repo)
    assert done.returncode == 0, done.stdout + done.stderr
    assert "lineage holds" in done.stdout
    # A fresh clone has no outputs and no DVC cache: that is not staleness.
    shutil.rmtree(repo / "out")
    shutil.rmtree(repo / ".dvc" / "cache")
    assert lineage(repo).returncode == 0
    # Code changed after dvc.lock recorded it.
    (repo / "code" / "make.py").write_text((repo / "code" / "make.py").read_text() + "# changed\n")
    done = lineage(repo)
    assert done.returncode == 1
    assert "code (modified) since dvc.lock recorded it, for 1 stage(s): make" in " ".join(done.stdout.split())
    sh(repo, "git", "checkout", "--", "code")
    assert lineage(repo).returncode == 0
    # A params section the stage reads, then one it does not.
    (repo / "params.yaml").write_text("a: 3\nb: 2\n")
    done = lineage(repo)
    assert done.returncode == 1 and "params.yaml section a (modified)" in " ".join(done.stdout.split())
    (repo / "params.yaml").write_text("a: 1\nb: 5\n")
    assert lineage(repo).returncode == 0


def test_a_report_made_from_other_outputs_is_named(repo: Path) -> None:
    commit, digest = report_claims(repo / "reports" / "report.md")
    # The commit of the code it was made from: the report's own commit came after it.
    assert commit == sh(repo, "git", "rev-parse", "HEAD~1").stdout.strip() != git_state(repo).commit
    assert digest == lock_digest(repo / "dvc.lock")
    # The stage re-run with other params, writing the same bytes: the report made from them stands.
    (repo / "params.yaml").write_text("a: 7\nb: 2\n")
    assert sh(repo, sys.executable, "-m", "dvc", "repro", "-q").returncode == 0
    done = lineage(repo)
    assert done.returncode == 0, done.stdout
    # Re-run with code that writes another result: dvc.lock records another output, the report does not.
    make = repo / "code" / "make.py"
    make.write_text(make.read_text().replace("write_text('1')", "write_text('2')"))
    assert sh(repo, sys.executable, "-m", "dvc", "repro", "-q").returncode == 0
    done = lineage(repo)
    assert done.returncode == 1
    assert "was made from other outputs" in " ".join(done.stdout.split())
    # A report without a lineage line is named too.
    (repo / "reports" / "report.md").write_text("# report\n")
    assert "states no lineage" in " ".join(lineage(repo).stdout.split())


def test_the_pipelines_own_writes_do_not_make_a_checkout_dirty(repo: Path) -> None:
    """A reproduction rewrites dvc.lock and reports/ before the report states its commit:
    that is its output, not a change of the code; any other tracked file is."""
    assert git_state(repo).dirty is False
    (repo / "dvc.lock").write_text((repo / "dvc.lock").read_text() + "# rewritten by dvc\n")
    (repo / "reports" / "report.md").write_text("# another report\n")
    assert git_state(repo).dirty is False
    assert git_state(repo, ignore=()).dirty is True
    (repo / "params.yaml").write_text("a: 1\nb: 3\n")
    assert git_state(repo).dirty is True


def test_the_lock_digest_covers_the_outputs_but_the_reports_own_not_the_layout(tmp_path: Path) -> None:
    lock = tmp_path / "dvc.lock"
    lock.write_text("schema: '2.0'\nstages:\n  make:\n    cmd: x\n    outs:\n    - path: out\n      md5: ab\n")
    digest = lock_digest(lock)
    lock.write_text("schema: '2.0'\nstages:\n  make: {cmd: x, outs: [{md5: ab, path: out}]}\n"
                    "  report:\n    cmd: mage report\n")
    assert lock_digest(lock) == digest  # the same entries in another layout, plus the report's own
    lock.write_text("schema: '2.0'\nstages:\n  make: {cmd: y, deps: [{path: code.py, md5: cd}], outs: [{md5: ab, path: out}]}\n")
    assert lock_digest(lock) == digest  # rerun for its code, the same output: the report made from it stands
    lock.write_text("schema: '2.0'\nstages:\n  make: {cmd: x, outs: [{md5: ef, path: out}]}\n")
    assert lock_digest(lock) != digest
    assert lock_digest(tmp_path / "absent.lock") is None
    lock.write_text("[1, 2]\n")
    with pytest.raises(ConfigError, match="not a dvc.lock"):
        lock_digest(lock)


@pytest.mark.parametrize(("text", "expected"), [
    ("schema: '2.0'\nstages: {make: [1,\n", "dvc.lock: not valid YAML at line 3, column 1"),
    ("- a list\n", "dvc.lock: not a dvc.lock (no 'stages' mapping)"),
    ("schema: '2.0'\nstages: {make: 5}\n", "'./dvc.lock' validation failed. expected a dictionary"),
])
def test_a_dvc_lock_that_cannot_be_read_is_one_line_naming_it(repo: Path, text: str, expected: str) -> None:
    """Issue 39: a dvc.lock that is not valid YAML (or not one DVC reads) ended in a traceback."""
    (repo / "dvc.lock").write_text(text)
    done = lineage(repo)
    assert done.returncode == 2, done.stdout + done.stderr
    problems = [line for line in done.stderr.splitlines() if line.startswith("  - ")]
    assert len(problems) == 1 and expected in problems[0], done.stderr
    assert "git checkout -- dvc.lock" in problems[0] and "Traceback" not in done.stderr


def test_mage_report_stops_on_a_dvc_lock_that_cannot_be_read_before_writing_a_file(tmp_path: Path) -> None:
    from mage_core.stages.report import report

    (tmp_path / "dvc.lock").write_text("stages: {make: [1,\n")
    with pytest.raises(ConfigError, match="dvc.lock: not valid YAML"):
        report({"kuhn_poker-mage": ("kuhn_poker", "mage")}, tmp_path / "eval", None, tmp_path / "reports", {},
               project_dir=tmp_path)
    assert not (tmp_path / "reports").exists()
