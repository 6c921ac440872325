"""The one command line: ``mage <command>`` (also ``python -m mage_core``).

Start-up stays fast: this module imports only argparse, rich-argparse and each
command's parser (cli_commands.py and cli_tasks.py: argparse only); each command
imports its stage when it runs, so ``mage --help`` never loads numpy, torch, mlflow
or prefect.
"""

from __future__ import annotations

import argparse
import errno
import os
import sys
from typing import Callable, Sequence

from rich_argparse import RawDescriptionRichHelpFormatter, RichHelpFormatter

from mage_core import cli_commands, cli_tasks

EXIT_OK, EXIT_FAILURE, EXIT_BAD_INPUT = 0, 1, 2

#: CPU kernels pinned to one instruction set, so a CPU run gives the same bits on x86
#: machines with AVX2 (given the same packages, thread count and params: docs/learning.md,
#: "What is reproducible, bit for bit"): torch's vectorised kernels, MKL (conditional numerical
#: reproducibility) and oneDNN otherwise pick AVX-512 code where the CPU has it, and
#: their rounding differs (measured: after 15 iterations of the CPU default the
#: weights differ between AVX-512 and AVX2 kernels; the speed does not). Set before
#: torch loads; a value already in the environment wins (e.g. ATEN_CPU_CAPABILITY=
#: default to choose the native kernels). GPUs are not affected.
PINNED_CPU_KERNELS = {"ATEN_CPU_CAPABILITY": "avx2", "MKL_CBWR": "AVX2", "ONEDNN_MAX_CPU_ISA": "AVX2"}

DESCRIPTION = """\
MAGE: meta-reinforcement learning for LLM agents that explore, then exploit,
the opponent or task in front of them across several episodes.

Every command reads the experiment from params.yaml (override with --params).
A bad params file is reported in full (every key, with what is allowed) and the
command exits with status 2 before writing anything.
"""

EPILOG = """\
examples:
  mage validate                              check params.yaml, show the populations
  mage tournament                            play the matches listed in params.yaml
  mage tournament --game tic_tac_toe --a minimax --b mcts-100 --games 100
  mage kuhn analyze                          exact best responses to the Kuhn opponents
  mage kuhn probe --policy DIR               a Kuhn policy's hand-2 bets given what hand 1 showed
  mage ttt analyze                           what a perfect exploiting player wins at Tic-Tac-Toe
  mage data generate webshop                 the WebShop catalogue of params.yaml (data.webshop), checked
  mage train --out artifacts/train/mage      train the method of params.yaml (resume: --resume)
  mage evaluate --policy artifacts/train/mage/best --out artifacts/eval/mage
  mage reproduce                             the paper reproduction (dvc.yaml) as one flow
  mage reproduce --profile smoke             the same in minutes, in its own workspace
  mage sweep reward_design                   a paper ablation grid (sweep.grids in params.yaml)
  mage sweep --vary train.learning_rate=[0.001,0.0003] --vary algorithm.preset=[mage,lamer]
  mage ui                                    the MLflow UI on this project's runs
  mage lineage                               do dvc.lock and reports/ come from this code?
  mage doctor --profile paper_kuhn_poker     check a GPU profile (Qwen3-4B) before launching it
"""


def build_parser() -> argparse.ArgumentParser:
    """The ``mage`` parser: its options, then each sub-command's part (mage_core/cli_commands.py, then the
    task-specific ones, mage_core/cli_tasks.py)."""
    parser = argparse.ArgumentParser(prog="mage", description=DESCRIPTION, epilog=EPILOG,
                                     formatter_class=RawDescriptionRichHelpFormatter)
    fmt = RichHelpFormatter  # sub-commands: wrapped one-paragraph descriptions
    parser.add_argument("--version", action="version", version=_version())
    sub = parser.add_subparsers(dest="command", metavar="<command>", required=True)
    # an experiment's stages
    cli_commands.add_validate(sub, fmt)
    cli_commands.add_tournament(sub, fmt)
    cli_commands.add_train(sub, fmt)
    cli_commands.add_sft(sub, fmt)
    cli_commands.add_evaluate(sub, fmt)
    # whole pipelines
    cli_commands.add_reproduce(sub, fmt)
    cli_commands.add_sweep(sub, fmt)
    # around the runs
    cli_commands.add_doctor(sub, fmt)
    cli_commands.add_ui(sub, fmt)
    cli_commands.add_report(sub, fmt)
    cli_commands.add_ablations(sub, fmt)
    cli_commands.add_lineage(sub, fmt)
    cli_commands.add_code_deps(sub, fmt)
    # exact analyses, then task data: commands with sub-commands
    cli_tasks.add_kuhn(sub, fmt)
    cli_tasks.add_ttt(sub, fmt)
    cli_tasks.add_data(sub, fmt)
    cli_tasks.add_alfworld(sub, fmt)
    cli_tasks.add_webshop(sub, fmt)
    return parser


def _version() -> str:
    from mage_core import __version__

    return f"mage {__version__}"


def main(argv: Sequence[str] | None = None) -> int:
    from mage_core.io.lifeline import from_environment

    # A stage command dies with the `dvc repro` running it (started by hand or by a pipeline), even on its
    # kill -9, and a process of a pipeline's tree with its parent (io/lifeline.py).
    if from_environment():
        import signal

        def _terminate(signum: int, frame: object) -> None:
            # The parent-death SIGTERM, or any: unwind, so that `finally` blocks run (the MLflow run
            # marked KILLED, vLLM engines and Ray workers closed) instead of dying on the spot. Once:
            # the kernel sends the parent-death signal again each time the process is handed to
            # another thread of the dying parent, and a second SystemExit would cut the unwinding short.
            signal.signal(signal.SIGTERM, signal.SIG_IGN)
            raise SystemExit(128 + signum)

        signal.signal(signal.SIGTERM, _terminate)
    if "torch" not in sys.modules:  # too late once torch is loaded (an in-process caller)
        for key, value in PINNED_CPU_KERNELS.items():
            os.environ.setdefault(key, value)
    parser = build_parser()
    args = parser.parse_args(argv)
    func: Callable[[argparse.Namespace], int] = args.func
    from mage_core.config import ConfigError

    try:
        return func(args)
    except ConfigError as err:
        _print_config_error(err)
        return EXIT_BAD_INPUT
    except Exception as err:
        from mage_core.backends import BackendUnavailable
        from mage_core.backends.openai_generator import EndpointError
        from mage_core.backends.ray_local import RayStartError
        from mage_core.evaluation.contracts import ContractError
        from mage_core.tracking.mlflow_tracker import TrackingUnavailable
        from mage_core.trainers.checkpoint import CheckpointError  # only on failure: it imports torch
        from mage_core.trainers.data_parallel import RendezvousError

        kinds = {CheckpointError: "checkpoint error", TrackingUnavailable: "tracking unavailable",
                 ContractError: "data contract broken", NotImplementedError: "not built yet",
                 BackendUnavailable: "backend unavailable", EndpointError: "endpoint error",
                 RendezvousError: "ranks cannot meet", RayStartError: "Ray did not start"}
        kind = next((name for cls, name in kinds.items() if isinstance(err, cls)), None)
        message = str(err)
        full = _disk_problem(err, args)
        if full is not None:
            kind, message = full
        if kind is None:
            raise
        from rich.console import Console
        from rich.text import Text

        Console(stderr=True, soft_wrap=True).print(Text.assemble((f"{kind}: ", "bold red"), message))
        return EXIT_FAILURE
    except KeyboardInterrupt:
        print("interrupted", file=sys.stderr)
        return 130


#: Errors of a disk that cannot take more (or any) writes, wherever in the work they happen.
DISK_ERRNOS = {errno.ENOSPC: "disk full", errno.EDQUOT: "disk quota exceeded", errno.EROFS: "read-only file system",
               errno.EFBIG: "file size limit reached"}


def _disk_problem(err: BaseException, args: argparse.Namespace) -> tuple[str, str] | None:
    """A full or read-only disk met during the work (the error or one it was raised from), as
    (kind, one line naming the file, what is kept and how to rerun the command ``args`` ran);
    None for any other error."""
    seen: BaseException | None = err
    while seen is not None:
        if isinstance(seen, OSError) and seen.errno in DISK_ERRNOS:
            where = f" writing {seen.filename}" if seen.filename else ""
            # Only `mage train` keeps checkpoints, and only --resume continues from them.
            command = " ".join(["mage", args.command, *filter(None, [getattr(args, f"{args.command}_command", None)])])
            kept, rerun = (("the previous outputs and the last whole checkpoint are kept",
                            f"rerun `{command}` with --resume auto, which continues from that checkpoint")
                           if args.command == "train" else
                           ("the previous outputs are kept", f"rerun the same `{command}` command"))
            return DISK_ERRNOS[seen.errno], (
                f"{seen.strerror or seen}{where}. `{command}` stopped; files are written whole or not at all: "
                f"{kept}; free space (or fix the folder) and {rerun}")
        seen = seen.__cause__ or seen.__context__
    return None


def _print_config_error(err: Exception) -> None:
    from rich.console import Console

    console = Console(stderr=True, soft_wrap=True)
    problems = getattr(err, "problems", [str(err)])
    console.print(f"[bold red]error:[/] {getattr(err, 'source', 'params')} has {len(problems)} problem(s); "
                  "nothing was run or written:", highlight=False)
    for problem in problems:
        console.print("  - " + problem, highlight=False, markup=False)


if __name__ == "__main__":
    raise SystemExit(main())
