"""Recorded ablation verdicts: what a profile run measured, kept where the default report can read it.

The default reproduction runs the grids that fit its time budget (``reproduce.ablations``); the
others run as profiles (``mage reproduce --profile ablations_kuhn``, in a workspace of their own).
When such a profile's flow succeeds, ``record`` copies what its ``ablations`` stage wrote into the
project, ``reports/profiles/<profile>/`` (git-tracked, not a DVC output):

- ``paper-ablations/``: the profile's verdicts.csv, section.md, and each grid's summary, figure and
  decomposition, as its own ``ablations`` stage wrote them;
- ``cost.md``, ``cost.csv``: what the profile's stages cost;
- ``provenance.json``: the profile, when and on what machine, the project's git commit, and the
  fingerprints that say whether the record still stands: the md5 of every code manifest its grids'
  stages ran under (``artifacts/code/{train,evaluate}-<env>.md5`` and ``ablations.md5``) and the
  digest of every point's resolved params;
- ``README.md``: the profile's ablation section, to read on its own.

The default ``ablations`` stage depends on ``reports/profiles`` and sets, beside every claim it
does not run, the recorded verdict of a profile whose grid holds it, marked **current** when the
fingerprints match this workspace (the same code manifests, the same params of every point: the
profile would train and judge exactly the same runs today) and **stale** otherwise, naming what
changed. A recorded verdict is never mixed with the flow's own: it stays in its own table.
"""

from __future__ import annotations

import csv
import hashlib
import json
import shutil
import subprocess
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, Mapping, Sequence

from mage_core.io.atomic import write_text_atomic

RECORDS = Path("reports") / "profiles"
PROVENANCE = "provenance.json"
SECTION = "paper-ablations"
#: What ``record`` copies from a profile workspace's reports/ besides paper-ablations/.
_COPIED = ("cost.md", "cost.csv")
FORMAT = 1


#: The folder's own page: it always exists (the ablations stage depends on the folder).
INDEX = """# Recorded ablation verdicts

One folder per profile run that measured ablation grids the default reproduction leaves out
(`mage reproduce --profile NAME` writes `reports/profiles/NAME/` when its flow succeeds). The default
report's ablation section sets each recorded verdict beside its claim, marked current or stale.
Written by the code, never by hand: docs/ablations.md, "Recorded verdicts".
"""


def ensure_index(root: Path) -> Path:
    """``root/reports/profiles/README.md``, written if missing (a DVC dependency must exist)."""
    path = root / RECORDS / "README.md"
    if not path.is_file():
        write_text_atomic(path, INDEX)
    return path


def digest(value: Any) -> str:
    """A short, stable digest of a JSON-able value (sorted keys)."""
    text = json.dumps(value, sort_keys=True, default=str, separators=(",", ":"))
    return hashlib.sha256(text.encode("utf-8")).hexdigest()[:16]


#: The params sections a point's train and evaluate stages depend on (dvc.yaml), plus the two
#: reproduce keys they read; the rest (tracking, the other runs, the grids' texts) measures nothing.
MEASURED = ("seed", "env", "opponents", "population", "model", "policy", "rollout", "algorithm", "train",
            "evaluation", "warm_start", "data", "backend")
MEASURED_KEYS = ("reproduce.iterations", "reproduce.eval_per_pair")


def measured_params(params: Mapping[str, Any]) -> dict[str, Any]:
    """The resolved params (dotted) of a point that decide what it measures."""
    return {k: v for k, v in params.items() if k.split(".", 1)[0] in MEASURED or k in MEASURED_KEYS}


def manifests_of(envs: Sequence[str], warm: Sequence[str] = ()) -> list[str]:
    """The code manifests (``artifacts/code/<name>``) a grid's stages run under: training and
    evaluation of its tasks, their task data, the warm starts of ``warm``, and the judging (the
    ablations stage). A data manifest is listed where the task has a data stage (its manifest exists)."""
    names = {f"{kind}-{env}.md5" for env in envs for kind in ("train", "evaluate", "data")}
    return sorted(names | {f"sft-{env}.md5" for env in warm} | {"ablations.md5"})


def file_md5(path: Path) -> str | None:
    return hashlib.md5(path.read_bytes()).hexdigest() if path.is_file() else None


#: What dvc.yaml's ``code`` stage writes beside the manifests (``code_deps.write_manifests``): the
#: md5 of every manifest a record names, so that the ablations stage depends on those manifests only
#: (an edit to another task's code leaves it up to date).
RECORDED_CODE = "records.txt"


def recorded_code_text(project: Path, manifests: Path) -> str:
    """``md5  artifacts/code/<name>`` (``-`` for a manifest the code stage does not write) for every
    manifest named by a record under ``project/reports/profiles``, sorted; empty without records."""
    names: set[str] = set()
    for provenance, _ in load_records(project).values():
        names.update(provenance["code"])
    return "".join(f"{file_md5(manifests / name) or '-'}  artifacts/code/{name}\n" for name in sorted(names))


def _current_code(project: Path) -> dict[str, str | None]:
    """Manifest name -> its md5 now, from the code stage's ``records.txt``."""
    path = project / "artifacts" / "code" / RECORDED_CODE
    out: dict[str, str | None] = {}
    for line in path.read_text(encoding="utf-8").splitlines() if path.is_file() else []:
        md5, _, where = line.partition("  ")
        out[where.rsplit("/", 1)[-1]] = None if md5 == "-" else md5
    return out


def point_fingerprints(data: Mapping[str, Any], source: str) -> dict[str, dict[str, Any]]:
    """Grid -> {"envs": [...], "points": {point: digest of its resolved params}} for every grid
    of ``reproduce.ablations`` of the raw params ``data``."""
    from mage_core.config.ablations import ablation_runs

    out: dict[str, dict[str, Any]] = {}
    for run in ablation_runs(data, source).values():
        grid = out.setdefault(run.grid, {"envs": [], "warm": [], "points": {}})
        if run.env not in grid["envs"]:
            grid["envs"].append(run.env)
        if run.env not in grid["warm"] and any(k.startswith(f"warm_start.tasks.{run.env}.") for k in run.params):
            grid["warm"].append(run.env)
        grid["points"][run.point] = digest(measured_params(run.params))
    return out


def manifests_of_grid(fingerprint: Mapping[str, Any]) -> list[str]:
    return manifests_of(fingerprint.get("envs") or [], fingerprint.get("warm") or [])


def _git_commit(project: Path) -> str:
    done = subprocess.run(["git", "rev-parse", "HEAD"], cwd=project, capture_output=True, text=True, check=False)
    if done.returncode != 0:
        return "unknown"
    dirty = subprocess.run(["git", "status", "--porcelain", "--untracked-files=no", "--", "mage_core", "params.yaml",
                            "dvc.yaml"], cwd=project, capture_output=True, text=True, check=False).stdout.strip()
    return done.stdout.strip() + ("+uncommitted" if dirty else "")


def record(project: Path, profile: str, workspace: Path) -> Path | None:
    """Record the ablation verdicts of profile ``profile`` (its flow just succeeded in
    ``workspace``) under ``project/reports/profiles/<profile>/``; returns the folder, or None when
    there is nothing to record: no grid, or a grid the project's own ``sweep.grids`` does not define
    (the smoke profile's), which no default report could name. The new record replaces an older one
    only once it is complete (written beside it, then swapped)."""
    import yaml

    from mage_core.config import load_config
    from mage_core.stages.cost import machine

    data = yaml.safe_load((workspace / "params.yaml").read_text(encoding="utf-8")) or {}
    grids = list((data.get("reproduce") or {}).get("ablations") or [])
    own = load_config(project / "params.yaml").sweep.grids
    if not grids or any(g not in own for g in grids):
        return None
    section = workspace / "reports" / SECTION
    if not (section / "verdicts.csv").is_file():
        raise FileNotFoundError(f"{section / 'verdicts.csv'}: the profile's ablations stage wrote no verdicts")
    fingerprints = point_fingerprints(data, str(workspace / "params.yaml"))
    names = sorted({name for g in grids for name in manifests_of_grid(fingerprints[g])})
    code = {name: file_md5(workspace / "artifacts" / "code" / name) for name in names}
    missing = [name for name, md5 in code.items() if md5 is None and not name.startswith("data-")]
    if missing:
        raise FileNotFoundError(f"{workspace / 'artifacts' / 'code'}: no {', '.join(missing)} (the code stage's "
                                "manifests): nothing says which code measured the verdicts")
    provenance = {
        "format": FORMAT, "profile": profile, "grids": grids,
        "recorded": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()), "machine": machine(),
        "commit": _git_commit(project), "command": f"mage reproduce --profile {profile}",
        "code": code, "points": {g: fingerprints[g]["points"] for g in grids},
        "envs": {g: fingerprints[g]["envs"] for g in grids}, "warm": {g: fingerprints[g]["warm"] for g in grids},
    }
    final = project / RECORDS / profile
    staging = final.with_name(f".{profile}.recording")
    shutil.rmtree(staging, ignore_errors=True)
    shutil.copytree(section, staging / SECTION)
    for name in _COPIED:
        if (workspace / "reports" / name).is_file():
            shutil.copy2(workspace / "reports" / name, staging / name)
    text = (section / "section.md").read_text(encoding="utf-8") if (section / "section.md").is_file() else ""
    write_text_atomic(staging / "README.md", readme(provenance, text))
    write_text_atomic(staging / PROVENANCE, json.dumps(provenance, indent=1, sort_keys=True) + "\n")
    old = final.with_name(f".{profile}.replaced")
    shutil.rmtree(old, ignore_errors=True)
    if final.exists():
        final.rename(old)
    staging.rename(final)
    shutil.rmtree(old, ignore_errors=True)
    return final


def readme(provenance: Mapping[str, Any], section: str) -> str:
    """The record's own page: where it comes from, then the profile's ablation section (its figure
    links are relative to this folder, as they were to the profile's reports/)."""
    return (f"# Recorded ablations: profile `{provenance['profile']}`\n\n"
            f"Measured by `{provenance['command']}` (grids {', '.join(provenance['grids'])}), recorded "
            f"{provenance['recorded']} on {provenance['machine']}, project commit `{provenance['commit']}`. "
            "The default report "
            "(`reports/report.md`) sets these verdicts beside the claims it does not run, marked current or stale "
            "(docs/ablations.md). What the stages cost: `cost.md`.\n\n"
            + section.replace("## Ablations (the paper's section 4.4)", "## The profile's ablation section", 1))


@dataclass(frozen=True)
class Recorded:
    """A recorded claim: its verdict row (verdicts.csv), the record's provenance, and whether the
    record still stands here (``stale`` empty) or what changed."""

    profile: str
    row: dict[str, str]
    provenance: dict[str, Any]
    stale: tuple[str, ...]

    @property
    def state(self) -> str:
        return "current" if not self.stale else "stale: " + "; ".join(self.stale)

    @property
    def interval(self) -> str:
        mean, low, high = (float(self.row[k]) for k in ("mean", "low", "high"))
        return f"{mean:+.3f} [{low:+.3f}, {high:+.3f}], {self.row['seeds']} seeds"


def load_records(project: Path) -> dict[str, tuple[dict[str, Any], list[dict[str, str]]]]:
    """Profile -> (provenance, verdict rows) of every record under ``project/reports/profiles``;
    a record that cannot be read is an error naming its file (a record is committed: a broken one
    is a mistake to fix, not to skip)."""
    out: dict[str, tuple[dict[str, Any], list[dict[str, str]]]] = {}
    root = project / RECORDS
    folders = sorted(p for p in root.iterdir() if p.is_dir() and not p.name.startswith(".")) if root.is_dir() else []
    for folder in folders:
        prov_path, rows_path = folder / PROVENANCE, folder / SECTION / "verdicts.csv"
        try:
            provenance = json.loads(prov_path.read_text(encoding="utf-8"))
            with rows_path.open(encoding="utf-8", newline="") as fh:
                rows = list(csv.DictReader(fh))
            for key in ("profile", "grids", "code", "points", "recorded", "machine", "commit"):
                if key not in provenance:
                    raise KeyError(key)
        except (OSError, ValueError, KeyError) as err:
            raise ValueError(f"{folder}: not a readable ablation record ({type(err).__name__}: {err}); rerun "
                             f"`mage reproduce --profile {folder.name}` or remove the folder") from None
        out[folder.name] = (provenance, rows)
    return out


def staleness(project: Path, provenance: Mapping[str, Any], grid: str,
              current: Mapping[str, Mapping[str, Any]] | None) -> tuple[str, ...]:
    """What differs between the record's run of ``grid`` and what this workspace would run now:
    a code manifest (``project/artifacts/code``), or the grid's points and their params (``current``:
    ``point_fingerprints`` of the profile's params today; None: the profile is gone)."""
    changed: list[str] = []
    if current is None:
        return (f"profile {provenance['profile']} is no longer in reproduce.profiles",)
    recorded = {"envs": (provenance.get("envs") or {}).get(grid), "warm": (provenance.get("warm") or {}).get(grid)}
    now = _current_code(project)
    for name in manifests_of_grid(recorded):
        md5 = now[name] if name in now else file_md5(project / "artifacts" / "code" / name)
        if provenance["code"].get(name) != md5:
            changed.append(f"code ({name.removesuffix('.md5')})")
    points = (current.get(grid) or {}).get("points")
    if points is None:
        changed.append(f"the profile no longer runs grid {grid}")
    elif points != provenance["points"].get(grid):
        before = provenance["points"].get(grid) or {}
        differ = sorted(set(points) ^ set(before) | {p for p in points if p in before and points[p] != before[p]})
        changed.append("params of " + ", ".join(differ[:3]) + (f" and {len(differ) - 3} more" if len(differ) > 3
                                                                 else ""))
    return tuple(changed)


def recorded_claims(project: Path, params_path: Path, unrun: Sequence[tuple[str, str, str]],
                    profile_params: Callable[[Path, str], dict[str, Any]]) -> dict[tuple[str, str], Recorded]:
    """(grid, claim text) -> its recorded verdict, for every claim of ``unrun`` (``claims_not_run``)
    that a record holds; where several records hold it, the latest recorded. ``profile_params``:
    the params file with a profile applied (``stages.profiles.profile_params``), raising for a
    profile the file no longer defines."""
    from mage_core.config import ConfigError

    wanted = {(grid, text) for grid, text, _ in unrun}
    found: dict[tuple[str, str], Recorded] = {}
    fingerprints: dict[str, Any] = {}
    for profile, (provenance, rows) in load_records(project).items():
        for row in rows:
            key = (row.get("grid", ""), row.get("claim", ""))
            if key not in wanted:
                continue
            if profile not in fingerprints:
                try:
                    fingerprints[profile] = point_fingerprints(profile_params(params_path, profile),
                                                               f"{params_path} with profile {profile}")
                except ConfigError:  # the profile is gone (or no longer valid): the record is stale
                    fingerprints[profile] = None
            candidate = Recorded(profile, row, provenance,
                                 staleness(project, provenance, key[0], fingerprints[profile]))
            if key not in found or provenance["recorded"] > found[key].provenance["recorded"]:
                found[key] = candidate
    return found


def recorded_markdown(project: Path, unrun: Sequence[tuple[str, str, str]],
                      recorded: Mapping[tuple[str, str], Recorded]) -> str:
    """The report's table of the claims this flow does not run: each with its recorded verdict
    (current or stale) where a record holds it, else how to run it."""
    from mage_core.evaluation.aggregate import markdown_table

    if not unrun:
        return ""
    rows = []
    for grid, text, how in unrun:
        r = recorded.get((grid, text))
        if r is None:
            rows.append([grid, text, "not run by this flow; no record", "", how])
            continue
        p = r.provenance
        state = r.state + ("" if not r.stale else " since")
        rows.append([grid, text, f"**{r.row['verdict']}** (recorded, {state})", r.interval,
                     f"`{p['command']}`, {p['recorded']}, commit `{str(p['commit'])[:12]}` "
                     f"([record]({RECORDS.relative_to('reports').as_posix()}/{r.profile}/README.md))"])
    shown: dict[tuple[str, str], Recorded] = {}
    for r in recorded.values():  # one decomposition per (profile, grid) the table draws on
        shown.setdefault((r.profile, r.row["grid"]), r)
    decompositions = "".join(_recorded_decomposition(project, r) for r in shown.values())
    return ("\n### Claims this flow does not run\n\n"
            "Their grids are not in `reproduce.ablations` (the default keeps what fits its time budget: "
            "`reports/cost.md`). Where a profile run recorded them (`reports/profiles/<profile>/`), the recorded "
            "verdict is set beside the claim, **current** when that run's code manifests and every point's params "
            "are this workspace's (the profile would measure the same today), **stale** otherwise, naming what "
            "changed. Recorded figures are the profile's, not this flow's.\n\n"
            + markdown_table(["grid", "the paper's claim", "verdict", "better minus than [95%]",
                              "recorded by, or run it with"], rows) + decompositions)


def _recorded_decomposition(project: Path, r: Recorded) -> str:
    """Each recorded grid's decomposition (decomposition.csv), as recorded."""
    from mage_core.evaluation.aggregate import markdown_table

    grid = r.row["grid"]
    path = project / RECORDS / r.profile / SECTION / grid / "decomposition.csv"
    if not path.is_file():
        return ""
    with path.open(encoding="utf-8", newline="") as fh:
        steps = list(csv.DictReader(fh))
    rows = [[s["step"], f"{s['from']} -> {s['to']}", s["changes"],
             f"{float(s['mean']):+.3f} [{float(s['low']):+.3f}, {float(s['high']):+.3f}]", s["seeds"]] for s in steps]
    return (f"\n#### {grid}: decomposition (recorded by profile {r.profile}, {r.state})\n\n"
            + markdown_table(["step", "from -> to", "what changes", "difference [95%]", "seeds"], rows))
